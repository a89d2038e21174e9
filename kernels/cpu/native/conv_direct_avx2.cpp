// AVX2 + FMA register tile of the native direct convolution (see conv_direct.h): up to 6 pixels x
// 16 output channels, 12 ymm accumulators; per reduction step two aligned loads of the weight
// panel and one broadcast per pixel feed 12 FMAs.
//   Test: ctest --test-dir build -R test_conv_direct
#include "kernels/cpu/native/conv_direct.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace kiln::native::direct {
namespace {

constexpr int kMR = 6, kNR = 16;

// Lane mask for the first n of 8 floats (the sign bit selects a lane in maskload/maskstore).
inline __m256i lanes(int64_t n) {
  const int64_t k = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int NB>
void tile(const TileArgs& t) {
  const __m256i m0 = lanes(t.kn), m1 = lanes(t.kn - 8);
  __m256 c0[NB], c1[NB];
#pragma GCC unroll 6
  for (int i = 0; i < NB; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  const float* b = t.b;
  for (int64_t sg = 0; sg < t.nseg; ++sg) {
    const float* a[NB];
#pragma GCC unroll 6
    for (int i = 0; i < NB; ++i) a[i] = t.a[i] + t.seg[sg];
    for (int64_t l = 0; l < t.seg_len; ++l, b += kNR) {
      const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
      for (int i = 0; i < NB; ++i) {
        const __m256 x = _mm256_broadcast_ss(a[i] + l);
        c0[i] = _mm256_fmadd_ps(x, b0, c0[i]);
        c1[i] = _mm256_fmadd_ps(x, b1, c1[i]);
      }
    }
  }
  const __m256 z = _mm256_setzero_ps();
  const __m256 bias0 = t.bias ? _mm256_maskload_ps(t.bias, m0) : z;
  const __m256 bias1 = t.bias ? _mm256_maskload_ps(t.bias + 8, m1) : z;
#pragma GCC unroll 6
  for (int i = 0; i < NB; ++i) {
    float* c = t.c[i] + t.c_off;
    __m256 v0 = _mm256_add_ps(c0[i], bias0), v1 = _mm256_add_ps(c1[i], bias1);
    if (t.accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_maskload_ps(c, m0));
      v1 = _mm256_add_ps(v1, _mm256_maskload_ps(c + 8, m1));
    }
    if (t.relu) v0 = _mm256_max_ps(v0, z), v1 = _mm256_max_ps(v1, z);
    _mm256_maskstore_ps(c, m0, v0);
    _mm256_maskstore_ps(c + 8, m1, v1);
  }
}

void tile_any(const TileArgs& t) {
  static constexpr TileFn kTiles[kMR + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};
  kTiles[t.nb](t);
}

// Backward-weights: N rows x 16 lanes of the gradient block summed over pixels. Not transposed:
// rows are output channels (dy broadcast), lanes a kernel row's run (x loaded); transposed (T):
// rows are run elements (x broadcast), lanes output channels (dy loaded).
template <int N, bool T>
void wei_tile(const WeiTileArgs& t) {
  const int64_t width = T ? t.nk : t.nl;
  const __m256i m0 = lanes(width), m1 = lanes(width - 8);
  __m256 c0[N], c1[N];
#pragma GCC unroll 6
  for (int i = 0; i < N; ++i) {
    c0[i] = _mm256_maskload_ps(t.dw + i * t.dw_step, m0);
    c1[i] = _mm256_maskload_ps(t.dw + i * t.dw_step + 8, m1);
  }
  for (int64_t row = 0; row < t.nrows; ++row) {
    const float* x = t.x_rows[row] + t.x_off;
    const float* dy = t.dy + row * t.npx * t.dy_step;
    for (int64_t q = 0; q < t.npx; ++q, x += t.x_step, dy += t.dy_step) {
      const float* vec = T ? dy : x;
      const float* one = T ? x : dy;
      const __m256 v0 = _mm256_maskload_ps(vec, m0), v1 = _mm256_maskload_ps(vec + 8, m1);
#pragma GCC unroll 6
      for (int i = 0; i < N; ++i) {
        const __m256 g = _mm256_broadcast_ss(one + i);
        c0[i] = _mm256_fmadd_ps(g, v0, c0[i]);
        c1[i] = _mm256_fmadd_ps(g, v1, c1[i]);
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < N; ++i) {
    _mm256_maskstore_ps(t.dw + i * t.dw_step, m0, c0[i]);
    _mm256_maskstore_ps(t.dw + i * t.dw_step + 8, m1, c1[i]);
  }
}

template <bool T>
void wei_tile_any(const WeiTileArgs& t) {
  static constexpr WeiTileFn kTiles[kMR + 1] = {nullptr,           wei_tile<1, T>, wei_tile<2, T>, wei_tile<3, T>,
                                                wei_tile<4, T>, wei_tile<5, T>, wei_tile<6, T>};
  kTiles[T ? t.nl : t.nk](t);
}

}  // namespace

Isa avx2_isa() {
  return Isa{"avx2", kMR, kNR, tile_any, kMR, kNR, wei_tile_any<false>, wei_tile_any<true>};
}

}  // namespace kiln::native::direct
#else
namespace kiln::native::direct {
Isa avx2_isa() { return Isa{}; }
}  // namespace kiln::native::direct
#endif
