// AVX512_BF16 peak loop: 16 independent zmm accumulators of vdpbf16ps (each lane adds two
// bfloat16 products into a float32: 64 FLOPs per instruction), compiled with -mavx512f
// -mavx512bf16 (bench/CMakeLists.txt); see peak_kernels.h. This is the bound of oneDNN's
// avx512_core_bf16 convolutions, which bfloat16 runs take on Zen 4 and Cooper Lake.
#include "bench/harness/peak_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BF16__)
// GCC 12's own intrinsics use _mm512_undefined_ps() and trip its -W(maybe-)uninitialized
// (GCC bug 105593, fixed in 13), as in kernels/cpu/native/gemm_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace kiln::bench::peak_detail {

bool built_avx512_bf16() { return true; }

float dpbf16_avx512(int64_t steps, float, float) {
  // Products of 2^-10 and 2^-10 are exact in bfloat16 and float32; a < 1 keeps the chains
  // bounded: each lane adds 2 * 2^-20 a step, far from float32's limits for any run here.
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0x1p-10f), _mm512_set1_ps(0x1p-10f));
  __m512 c[16];
  for (int k = 0; k < 16; ++k) c[k] = _mm512_set1_ps(float(k));
  for (int64_t i = 0; i < steps; ++i) {
    c[0] = _mm512_dpbf16_ps(c[0], x, x);
    c[1] = _mm512_dpbf16_ps(c[1], x, x);
    c[2] = _mm512_dpbf16_ps(c[2], x, x);
    c[3] = _mm512_dpbf16_ps(c[3], x, x);
    c[4] = _mm512_dpbf16_ps(c[4], x, x);
    c[5] = _mm512_dpbf16_ps(c[5], x, x);
    c[6] = _mm512_dpbf16_ps(c[6], x, x);
    c[7] = _mm512_dpbf16_ps(c[7], x, x);
    c[8] = _mm512_dpbf16_ps(c[8], x, x);
    c[9] = _mm512_dpbf16_ps(c[9], x, x);
    c[10] = _mm512_dpbf16_ps(c[10], x, x);
    c[11] = _mm512_dpbf16_ps(c[11], x, x);
    c[12] = _mm512_dpbf16_ps(c[12], x, x);
    c[13] = _mm512_dpbf16_ps(c[13], x, x);
    c[14] = _mm512_dpbf16_ps(c[14], x, x);
    c[15] = _mm512_dpbf16_ps(c[15], x, x);
  }
  __m512 s = c[0];
  for (int k = 1; k < 16; ++k) s = _mm512_add_ps(s, c[k]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace kiln::bench::peak_detail

#else

namespace kiln::bench::peak_detail {
bool built_avx512_bf16() { return false; }
float dpbf16_avx512(int64_t, float, float) { return 0.f; }
}  // namespace kiln::bench::peak_detail

#endif
