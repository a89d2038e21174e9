// kiln's own CUDA kernels of the normalisation family: batch norm (per-channel sums in double
// over fixed row chunks, added in order: deterministic, no atomics), dropout (the CPU's Philox
// mask, bit for bit), softmax and log-softmax (a warp per row when inner == 1, a thread per
// column otherwise). float32 and float64; all three also bfloat16 and float16
// (computed in float32; batch norm's parameters and statistics float32, as BatchNormDesc says).
// Same descriptors and signatures as kernels/cpu/native/norm.h, DEVICE pointers, launched on
// current_stream(), never synchronising.
// Test (emulated): ctest --test-dir build -R emu   (tests/emu/test_norm.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/norm.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_batch_norm(const BatchNormDesc& d);
void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd);
void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias);

bool supports_dropout(const DropoutDesc& d);
void dropout_fwd(const DropoutDesc& d, const void* src, void* dst, uint8_t* mask);
void dropout_bwd(const DropoutDesc& d, const void* diff_dst, const uint8_t* mask, void* diff_src);

bool supports_softmax(const SoftmaxDesc& d);
void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst);
void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src);

KILN_CUDA_NAMESPACE_END
