// AVX-512 register tile of the native direct convolution (see conv_direct.h): up to 12 pixels x
// 32 output channels, 24 zmm accumulators; per reduction step two aligned loads of the weight
// panel and one broadcast per pixel feed 24 FMAs. Compiled with -mavx512f alone (CMakeLists.txt),
// so it runs on Knights Landing too.
//   Test: ctest --test-dir build -R test_conv_direct
#include "kernels/cpu/native/conv_direct.h"

#if defined(__AVX512F__)
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_ps (bug 105593)
#endif
#include <immintrin.h>

namespace kiln::native::direct {
namespace {

constexpr int kMR = 12, kNR = 32;

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u); }

template <int NB>
void tile(const TileArgs& t) {
  const __mmask16 m0 = lanes(t.kn), m1 = lanes(t.kn - 16);
  __m512 c0[NB], c1[NB];
#pragma GCC unroll 12
  for (int i = 0; i < NB; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  const float* b = t.b;
  for (int64_t sg = 0; sg < t.nseg; ++sg) {
    const float* a[NB];
#pragma GCC unroll 12
    for (int i = 0; i < NB; ++i) a[i] = t.a[i] + t.seg[sg];
    for (int64_t l = 0; l < t.seg_len; ++l, b += kNR) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
      for (int i = 0; i < NB; ++i) {
        const __m512 x = _mm512_set1_ps(a[i][l]);
        c0[i] = _mm512_fmadd_ps(x, b0, c0[i]);
        c1[i] = _mm512_fmadd_ps(x, b1, c1[i]);
      }
    }
  }
  const __m512 z = _mm512_setzero_ps();
  const __m512 bias0 = t.bias ? _mm512_maskz_loadu_ps(m0, t.bias) : z;
  const __m512 bias1 = t.bias ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : z;
#pragma GCC unroll 12
  for (int i = 0; i < NB; ++i) {
    float* c = t.c[i] + t.c_off;
    __m512 v0 = _mm512_add_ps(c0[i], bias0), v1 = _mm512_add_ps(c1[i], bias1);
    if (t.accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    if (t.relu) v0 = _mm512_max_ps(v0, z), v1 = _mm512_max_ps(v1, z);
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

void tile_any(const TileArgs& t) {
  static constexpr TileFn kTiles[kMR + 1] = {nullptr,  tile<1>, tile<2>, tile<3>,  tile<4>,  tile<5>, tile<6>,
                                             tile<7>,  tile<8>, tile<9>, tile<10>, tile<11>, tile<12>};
  kTiles[t.nb](t);
}

// Backward-weights: N rows x 32 lanes of the gradient block summed over pixels. Not transposed:
// rows are output channels (dy broadcast), lanes a kernel row's run (x loaded); transposed (T):
// rows are run elements (x broadcast), lanes output channels (dy loaded).
template <int N, bool T>
void wei_tile(const WeiTileArgs& t) {
  const int64_t width = T ? t.nk : t.nl;
  const __mmask16 m0 = lanes(width), m1 = lanes(width - 16);
  __m512 c0[N], c1[N];
#pragma GCC unroll 12
  for (int i = 0; i < N; ++i) {
    c0[i] = _mm512_maskz_loadu_ps(m0, t.dw + i * t.dw_step);
    c1[i] = _mm512_maskz_loadu_ps(m1, t.dw + i * t.dw_step + 16);
  }
  for (int64_t row = 0; row < t.nrows; ++row) {
    const float* x = t.x_rows[row] + t.x_off;
    const float* dy = t.dy + row * t.npx * t.dy_step;
    for (int64_t q = 0; q < t.npx; ++q, x += t.x_step, dy += t.dy_step) {
      const float* vec = T ? dy : x;
      const float* one = T ? x : dy;
      const __m512 v0 = _mm512_maskz_loadu_ps(m0, vec), v1 = _mm512_maskz_loadu_ps(m1, vec + 16);
#pragma GCC unroll 12
      for (int i = 0; i < N; ++i) {
        const __m512 g = _mm512_set1_ps(one[i]);
        c0[i] = _mm512_fmadd_ps(g, v0, c0[i]);
        c1[i] = _mm512_fmadd_ps(g, v1, c1[i]);
      }
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < N; ++i) {
    _mm512_mask_storeu_ps(t.dw + i * t.dw_step, m0, c0[i]);
    _mm512_mask_storeu_ps(t.dw + i * t.dw_step + 16, m1, c1[i]);
  }
}

template <bool T>
void wei_tile_any(const WeiTileArgs& t) {
  static constexpr WeiTileFn kTiles[kMR + 1] = {
      nullptr,          wei_tile<1, T>, wei_tile<2, T>, wei_tile<3, T>,  wei_tile<4, T>,  wei_tile<5, T>, wei_tile<6, T>,
      wei_tile<7, T>, wei_tile<8, T>, wei_tile<9, T>, wei_tile<10, T>, wei_tile<11, T>, wei_tile<12, T>};
  kTiles[T ? t.nl : t.nk](t);
}

}  // namespace

Isa avx512_isa() {
  return Isa{"avx512", kMR, kNR, tile_any, kMR, kNR, wei_tile_any<false>, wei_tile_any<true>};
}

}  // namespace kiln::native::direct
#else
namespace kiln::native::direct {
Isa avx512_isa() { return Isa{}; }
}  // namespace kiln::native::direct
#endif
