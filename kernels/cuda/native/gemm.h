// kiln's own CUDA GEMM (float32, float64; float16 and bfloat16 summed in float32), the engine of Linear and of the im2col convolution.
// Row-major, semantics of GemmDesc (kernels/common/gemm.h). Pointers are DEVICE pointers; the
// work is queued on kiln::cuda::current_stream() and never synchronised. Each element of C is
// summed by one thread in a fixed k order, so results are bitwise reproducible run to run.
//   emu test: ctest --test-dir build -R test_gemm -L emu
#pragma once

#include <cstdint>

#include "kernels/common/gemm.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_gemm(const GemmDesc& d);  // float32, float64, float16, bfloat16
void gemm(const GemmDesc& d, const void* a, const void* b, void* c);

// Plain-pointer float32 entry for other kernels (conv), batched with element strides:
// C_i[m x n] = alpha * op(A_i) op(B_i) + beta * C_i, X_i = x + i * stride_x.
void sgemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                   int64_t ldc, int64_t stride_c, int64_t batch);
inline void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_batched(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

KILN_CUDA_NAMESPACE_END
