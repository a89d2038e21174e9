// kiln's own CUDA optimizer kernels: fused in-place SGD, Adam/AdamW and LARS updates (one read
// and one write of each array), sum of squares in double (fixed per-block partials, then one
// block adds them in order: deterministic, no atomics) and in-place scaling; plus the
// multi-tensor update (kernels/common/multi_tensor.h) that updates a whole list of parameters in
// one launch. float32 and float64; same descriptors and signatures as kernels/cpu/native/optim.h,
// DEVICE pointers, launched on current_stream().
// Test (emulated): ctest --test-dir build -R emu   (tests/emu/test_optim.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/multi_tensor.h"
#include "kernels/common/optim.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_optim_sgd(const SGDStepDesc& d);
bool supports_optim_adam(const AdamStepDesc& d);
bool supports_optim_lars(const LarsStepDesc& d);
bool supports_optim_vec(const VecDesc& d);
void sgd_step(const SGDStepDesc& d, void* param, const void* grad, void* momentum_buffer);
void adam_step(const AdamStepDesc& d, void* param, const void* grad, void* exp_avg, void* exp_avg_sq);
void lars_step(const LarsStepDesc& d, void* param, const void* grad, void* momentum_buffer);
// out: a DEVICE double.
void sum_squares(const VecDesc& d, const void* x, double* out);
void scale(const VecDesc& d, void* x);

// entries: d.count TensorListEntry in DEVICE memory (their pointers device pointers), planned
// with plan_tensor_list(d.chunk) into d.total_chunks. One launch of d.total_chunks blocks.
bool supports_multi_tensor(const MultiTensorDesc& d);
void multi_tensor_step(const MultiTensorDesc& d, const TensorListEntry* entries);
// out[i] = sum of squares of entry i's param (of_grad false) or grad (true), in double, into
// d.count DEVICE doubles: the per-tensor norms LARS's trust ratios and per-parameter clipping
// need, for the whole list in two launches (chunk partials, then each entry's chunks in order).
void multi_tensor_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out);

KILN_CUDA_NAMESPACE_END
