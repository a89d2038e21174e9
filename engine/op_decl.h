// Kernel-op declarations: each kernel op's name, descriptor type and kernel signature in one type.
//   struct kiln::kernel_op::conv2d_fwd  { name = "conv2d_fwd"; Desc = ConvDesc;
//                                         Kernel = void(const ConvDesc&, const void* src, ...); }
// Two namespaces, never mixed: kiln::kernel_op:: names what the dispatcher runs (a descriptor and
// raw pointers, one kernel per backend); kiln::ops:: are the functions a user calls on tensors
// (engine/ops/), which check shapes, record autograd and dispatch one or more kernel ops.
// Built-in ops are listed once in engine/op_list.inc. A program declares its own with
// KILN_DECLARE_KERNEL_OP (examples/custom_kernel). Registering a kernel of another signature for an op,
// or calling it with the wrong arguments, fails to compile (engine/dispatch.h).
//
// KernelPayload is the opaque state a forward kernel may hand to its backward (Flashlight's
// AutogradPayload): the op keeps it with the autograd node and passes it to the backward call;
// a backward candidate sees it only when the same backend filled it.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/common/concat.h"
#include "kernels/common/conv.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/gemm.h"
#include "kernels/common/index.h"
#include "kernels/common/linear.h"
#include "kernels/common/loss.h"
#include "kernels/common/multi_tensor.h"
#include "kernels/common/norm.h"
#include "kernels/common/optim.h"
#include "kernels/common/payload.h"
#include "kernels/common/pool.h"
#include "kernels/common/reduce.h"
#include "kernels/common/rnn.h"
#include "kernels/common/shape.h"

namespace kiln {

template <class Signature>
struct OpDecl;
template <class D, class... A>
class OpTable;  // engine/dispatch.h

// Kernel: the plain kernel. PayloadKernel: a kernel that also reads or fills the payload.
template <class D, class... A>
struct OpDecl<void(const D&, A...)> {
  using Desc = D;
  using Kernel = void (*)(const D&, A...);
  using PayloadKernel = void (*)(const D&, KernelPayload&, A...);
  using Supports = bool (*)(const D&);
  using Priority = int (*)(const D&);
  using Table = OpTable<D, A...>;
};

// KILN_DECLARE_KERNEL_OP(type, "name", Desc, arguments...): declares op `type` with kernels
// void(const Desc&, arguments...). Argument names are documentation.
#define KILN_DECLARE_KERNEL_OP(type, op_name, D, ...)          \
  struct type : ::kiln::OpDecl<void(const D&, __VA_ARGS__)> { \
    static constexpr const char* name = op_name;              \
  }

namespace kernel_op {
#define KILN_KERNEL_OP(id, D, ...) KILN_DECLARE_KERNEL_OP(id, #id, D, __VA_ARGS__);
#include "engine/op_list.inc"
#undef KILN_KERNEL_OP
}  // namespace kernel_op

}  // namespace kiln
