// kiln's own single-precision GEMM, the engine of linear layers and of convolution (im2col and
// implicit GEMM). Row-major; see GemmDesc. Parallel inside with OpenMP (must not be called from
// inside a parallel region; it then runs on one thread).
#pragma once

#include "kernels/common/gemm.h"

namespace kiln::native {

bool supports_gemm(const GemmDesc& d);  // float32 (and float64 through the portable path)
void gemm(const GemmDesc& d, const void* a, const void* b, void* c);

// Plain-pointer entry for other kernels (conv): C[m x n] = alpha * op(A) op(B) + beta * C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace kiln::native
