// AVX2 + FMA float32 peak loop: 12 independent ymm accumulators (vfmadd231ps; 16 ymm registers
// hold them and the two operands), compiled with -mavx2 -mfma (bench/CMakeLists.txt); see
// peak_kernels.h.
#include "bench/harness/peak_kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace kiln::bench::peak_detail {

bool built_avx2() { return true; }

float fma_avx2(int64_t steps, float a_in, float b_in) {
  const __m256 a = _mm256_set1_ps(a_in), b = _mm256_set1_ps(b_in);
  __m256 c0 = _mm256_set1_ps(0.f / 16), c1 = _mm256_set1_ps(1.f / 16);
  __m256 c2 = _mm256_set1_ps(2.f / 16), c3 = _mm256_set1_ps(3.f / 16);
  __m256 c4 = _mm256_set1_ps(4.f / 16), c5 = _mm256_set1_ps(5.f / 16);
  __m256 c6 = _mm256_set1_ps(6.f / 16), c7 = _mm256_set1_ps(7.f / 16);
  __m256 c8 = _mm256_set1_ps(8.f / 16), c9 = _mm256_set1_ps(9.f / 16);
  __m256 c10 = _mm256_set1_ps(10.f / 16), c11 = _mm256_set1_ps(11.f / 16);
  for (int64_t i = 0; i < steps; ++i) {
    c0 = _mm256_fmadd_ps(c0, a, b);
    c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b);
    c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b);
    c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b);
    c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b);
    c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b);
    c11 = _mm256_fmadd_ps(c11, a, b);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

}  // namespace kiln::bench::peak_detail

#else

namespace kiln::bench::peak_detail {
bool built_avx2() { return false; }
float fma_avx2(int64_t, float, float) { return 0.f; }
}  // namespace kiln::bench::peak_detail

#endif
