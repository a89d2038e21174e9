// Reference GEMM: the naive triple loop over every batch entry, accumulating in T (the tests run
// it in double as the oracle). C = alpha * op(A) op(B) + beta * C; beta == 0 never reads C.
//   ctest --test-dir build -R test_gemm
#pragma once

#include "kernels/common/gemm.h"

namespace kiln::ref {

template <class T>
void gemm(const GemmDesc& d, const T* a, const T* b, T* c) {
  const T alpha = T(d.alpha), beta = T(d.beta);
  for (int64_t bi = 0; bi < d.batch; ++bi) {
    const T* ab = a + bi * d.stride_a;
    const T* bb = b + bi * d.stride_b;
    T* cb = c + bi * d.stride_c;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        T acc = T(0);
        for (int64_t p = 0; p < d.k; ++p) {
          const T av = d.trans_a ? ab[p * d.lda + i] : ab[i * d.lda + p];
          const T bv = d.trans_b ? bb[j * d.ldb + p] : bb[p * d.ldb + j];
          acc += av * bv;
        }
        T& cv = cb[i * d.ldc + j];
        cv = beta == T(0) ? alpha * acc : alpha * acc + beta * cv;
      }
  }
}

}  // namespace kiln::ref
