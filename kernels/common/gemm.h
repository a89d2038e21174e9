// GEMM descriptor: C = alpha * op(A) * op(B) + beta * C, row-major, with leading dimensions in
// elements (oneDNN/BLAS vocabulary: M, N, K, lda, ldb, ldc, transa, transb).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

struct GemmDesc {
  DType dtype = DType::float32;
  bool trans_a = false;  // A is stored K x M (lda >= M) instead of M x K (lda >= K)
  bool trans_b = false;  // B is stored N x K (ldb >= K) instead of K x N (ldb >= N)
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  double alpha = 1.0, beta = 0.0;  // beta == 0: C is not read (may hold garbage or NaN)
  int64_t batch = 1;               // batched GEMM: operand i at base + i * stride_*
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::string str() const;
};

}  // namespace kiln
