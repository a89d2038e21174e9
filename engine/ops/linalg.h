// Matrix products, differentiable: matmul and linear (PyTorch's semantics and weight layout).
// Operands share dtype (float32 or float64; float16/bfloat16 compute in float32) and device.
// Non-contiguous operands whose last two dims are row- or column-major (a transposed view, a
// slice) go to the GEMM as they are, through its transpose flags and leading dims; others are
// copied first. Errors name the op and the shapes.
//   ctest --test-dir build -R "test_gemm|test_linalg_grad"
#pragma once

#include "engine/tensor.h"

namespace kiln::ops {

// [m, k] @ [k, n] -> [m, n];  [B, m, k] @ [B, k, n] -> [B, m, n];  [B, m, k] @ [k, n] -> [B, m, n].
Tensor matmul(const Tensor& a, const Tensor& b);

// y = x weight^T + bias. x [..., in] (any number of leading dims, flattened for the GEMM),
// weight [out, in], bias [out] or an undefined Tensor; y [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace kiln::ops
