// kiln's own CPU kernels of the normalisation family: batch norm (parallel over channels, stats
// accumulated in double), dropout (Philox mask, same bits for any thread count), softmax and
// log-softmax (parallel over rows; [dim, inner] blocks processed with unit-stride inner loops).
// float32 and float64. Test: ctest --test-dir build -R norm ; bench: build/bench/bench_norm
#pragma once

#include <cstdint>

#include "kernels/common/norm.h"

namespace kiln::native {

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

}  // namespace kiln::native
