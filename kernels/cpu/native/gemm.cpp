// Placeholder until the blocked, packed implementation lands: a correct cache-unfriendly GEMM.
#include "kernels/cpu/native/gemm.h"

#include "kernels/common/parallel.h"

namespace kiln::native {

template <class T>
static void gemm_t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                   int64_t ldb, T beta, T* c, int64_t ldc) {
  parallel_for(0, m, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T* crow = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? T(0) : beta * crow[j];
      for (int64_t p = 0; p < k; ++p) {
        T av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
        if (!tb) {
          const T* brow = b + p * ldb;
          for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
        } else {
          for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
        }
      }
    }
  });
}

bool supports_gemm(const GemmDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  for (int64_t i = 0; i < d.batch; ++i) {
    if (d.dtype == DType::float32)
      gemm_t<float>(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), static_cast<const float*>(a) + i * d.stride_a,
                    d.lda, static_cast<const float*>(b) + i * d.stride_b, d.ldb, float(d.beta),
                    static_cast<float*>(c) + i * d.stride_c, d.ldc);
    else
      gemm_t<double>(d.trans_a, d.trans_b, d.m, d.n, d.k, d.alpha, static_cast<const double*>(a) + i * d.stride_a,
                     d.lda, static_cast<const double*>(b) + i * d.stride_b, d.ldb, d.beta,
                     static_cast<double*>(c) + i * d.stride_c, d.ldc);
  }
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_t<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace kiln::native
