// AVX-512F float32 FMA peak loop: 16 independent zmm accumulators (vfmadd231ps), compiled with
// -mavx512f (bench/CMakeLists.txt); see peak_kernels.h.
#include "bench/harness/peak_kernels.h"

#if defined(__AVX512F__)
// GCC 12's own intrinsics use _mm512_undefined_ps() and trip its -W(maybe-)uninitialized
// (GCC bug 105593, fixed in 13), as in kernels/cpu/native/gemm_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace kiln::bench::peak_detail {

bool built_avx512() { return true; }

float fma_avx512(int64_t steps, float a_in, float b_in) {
  const __m512 a = _mm512_set1_ps(a_in), b = _mm512_set1_ps(b_in);
  __m512 c0 = _mm512_set1_ps(0.f / 16), c1 = _mm512_set1_ps(1.f / 16);
  __m512 c2 = _mm512_set1_ps(2.f / 16), c3 = _mm512_set1_ps(3.f / 16);
  __m512 c4 = _mm512_set1_ps(4.f / 16), c5 = _mm512_set1_ps(5.f / 16);
  __m512 c6 = _mm512_set1_ps(6.f / 16), c7 = _mm512_set1_ps(7.f / 16);
  __m512 c8 = _mm512_set1_ps(8.f / 16), c9 = _mm512_set1_ps(9.f / 16);
  __m512 c10 = _mm512_set1_ps(10.f / 16), c11 = _mm512_set1_ps(11.f / 16);
  __m512 c12 = _mm512_set1_ps(12.f / 16), c13 = _mm512_set1_ps(13.f / 16);
  __m512 c14 = _mm512_set1_ps(14.f / 16), c15 = _mm512_set1_ps(15.f / 16);
  for (int64_t i = 0; i < steps; ++i) {
    c0 = _mm512_fmadd_ps(c0, a, b);
    c1 = _mm512_fmadd_ps(c1, a, b);
    c2 = _mm512_fmadd_ps(c2, a, b);
    c3 = _mm512_fmadd_ps(c3, a, b);
    c4 = _mm512_fmadd_ps(c4, a, b);
    c5 = _mm512_fmadd_ps(c5, a, b);
    c6 = _mm512_fmadd_ps(c6, a, b);
    c7 = _mm512_fmadd_ps(c7, a, b);
    c8 = _mm512_fmadd_ps(c8, a, b);
    c9 = _mm512_fmadd_ps(c9, a, b);
    c10 = _mm512_fmadd_ps(c10, a, b);
    c11 = _mm512_fmadd_ps(c11, a, b);
    c12 = _mm512_fmadd_ps(c12, a, b);
    c13 = _mm512_fmadd_ps(c13, a, b);
    c14 = _mm512_fmadd_ps(c14, a, b);
    c15 = _mm512_fmadd_ps(c15, a, b);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                     _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
  return _mm512_reduce_add_ps(s);
}

}  // namespace kiln::bench::peak_detail

#else

namespace kiln::bench::peak_detail {
bool built_avx512() { return false; }
float fma_avx512(int64_t, float, float) { return 0.f; }
}  // namespace kiln::bench::peak_detail

#endif
