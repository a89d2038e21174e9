// AVX512_BF16 register tile of the native direct convolution in bfloat16 (conv_direct.h,
// TileArgsBf16): up to 12 pixels x 32 output channels, 24 zmm of float32 sums; per pair of
// reduction elements two aligned loads of the panel (16 channels x 2 each) and one 32-bit
// broadcast of the pixel's pair feed 24 vdpbf16ps, twice the float32 tile's products per
// instruction. Compiled with -mavx512bf16 -mavx512bw -mavx512vl (CMakeLists.txt).
//   Test: ctest --test-dir build -R test_conv_direct
#include "kernels/cpu/native/conv_direct.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_ps (bug 105593)
#endif
#include <immintrin.h>

#include <cstring>

namespace kiln::native::direct {
namespace {

constexpr int kMR = 12, kNR = 32;

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u); }

inline __m512 widen(__m256i bf16) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16)); }

inline uint32_t pair_at(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int NB>
void tile(const TileArgsBf16& t) {
  const __mmask16 m0 = lanes(t.kn), m1 = lanes(t.kn - 16);
  __m512 c0[NB], c1[NB];
#pragma GCC unroll 12
  for (int i = 0; i < NB; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  const uint16_t* b = t.b;
  for (int64_t sg = 0; sg < t.nseg; ++sg) {
    const uint16_t* a[NB];
#pragma GCC unroll 12
    for (int i = 0; i < NB; ++i) a[i] = t.a[i] + t.seg[sg];
    for (int64_t l = 0; l < t.seg_len; l += 2, b += 2 * kNR) {
      const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + kNR);
#pragma GCC unroll 12
      for (int i = 0; i < NB; ++i) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(int(pair_at(a[i] + l)));
        c0[i] = _mm512_dpbf16_ps(c0[i], x, b0);
        c1[i] = _mm512_dpbf16_ps(c1[i], x, b1);
      }
    }
  }
  const __m512 z = _mm512_setzero_ps();
  const __m512 bias0 = t.bias ? _mm512_maskz_loadu_ps(m0, t.bias) : z;
  const __m512 bias1 = t.bias ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : z;
#pragma GCC unroll 12
  for (int i = 0; i < NB; ++i) {
    uint16_t* c = t.c[i] + t.c_off;
    __m512 v0 = _mm512_add_ps(c0[i], bias0), v1 = _mm512_add_ps(c1[i], bias1);
    if (t.accumulate) {
      v0 = _mm512_add_ps(v0, widen(_mm256_maskz_loadu_epi16(m0, c)));
      v1 = _mm512_add_ps(v1, widen(_mm256_maskz_loadu_epi16(m1, c + 16)));
    }
    if (t.relu) v0 = _mm512_max_ps(v0, z), v1 = _mm512_max_ps(v1, z);
    // Round to nearest even once (vcvtneps2bf16).
    _mm256_mask_storeu_epi16(c, m0, (__m256i)_mm512_cvtneps_pbh(v0));
    _mm256_mask_storeu_epi16(c + 16, m1, (__m256i)_mm512_cvtneps_pbh(v1));
  }
}

void tile_any(const TileArgsBf16& t) {
  static constexpr TileBf16Fn kTiles[kMR + 1] = {nullptr,  tile<1>, tile<2>, tile<3>,  tile<4>,  tile<5>, tile<6>,
                                                 tile<7>,  tile<8>, tile<9>, tile<10>, tile<11>, tile<12>};
  kTiles[t.nb](t);
}

}  // namespace

IsaBf16 avx512bf16_isa() { return IsaBf16{"avx512_bf16", kMR, kNR, tile_any}; }

}  // namespace kiln::native::direct
#else
namespace kiln::native::direct {
IsaBf16 avx512bf16_isa() { return IsaBf16{}; }
}  // namespace kiln::native::direct
#endif
