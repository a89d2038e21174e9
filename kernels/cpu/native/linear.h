// kiln's own inner product (Linear) on its GEMM (kernels/cpu/native/gemm.h): forward writes the
// bias into dst and accumulates the product on it (beta = 1), backward-data is diff_dst wei,
// backward-weights diff_dst^T src, and the bias gradient a column sum in a fixed row order
// (deterministic, parallel over columns). float32, float64 and bfloat16 (every operand bfloat16, the
// bias too: products and bias sums in float32 through gemm_bf16.h, each result rounded once);
// layouts in kernels/common/linear.h.
//   ctest --test-dir build -R "test_linear_kernels|test_linalg_grad"    ./build/bench/bench_backends
#pragma once

#include "kernels/common/linear.h"

namespace kiln::native {

bool supports_linear(const LinearDesc& d);
void linear_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void linear_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted); src may be null when diff_wei is.
void linear_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

}  // namespace kiln::native
