// oneDNN batch normalisation and softmax / log-softmax on kiln's BatchNormDesc / SoftmaxDesc,
// same signatures and semantics as kernels/cpu/native/norm.h (contiguous float32).
// Batch norm: oneDNN normalises and differentiates ([N, C, S] as NCHW with W = 1); kiln's extra
// contract is done here on the C per-channel values: save_invstd = 1/sqrt(var + eps) from
// oneDNN's biased batch variance, the running statistics' momentum update with the unbiased
// variance, and, for backward, the variance oneDNN wants rebuilt as 1/invstd^2 - eps. Absent
// weight/bias run as scale 1, shift 0; unwanted gradients go to scratch.
// Softmax: softmax_v2 (accurate / log) along axis 1 of [outer, dim, inner]; backward from the
// forward output, as kiln's contract says.
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include "kernels/common/norm.h"

namespace kiln::onednn {

bool supports_batch_norm(const BatchNormDesc& d);
void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd);
void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias);

bool supports_softmax(const SoftmaxDesc& d);
void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst);
void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src);

}  // namespace kiln::onednn
