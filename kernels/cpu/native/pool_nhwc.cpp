// Native pooling on channels-last arrays (PoolDesc::nhwc): every output pixel reads whole
// C-vectors of its window, so the channel loop is contiguous and vectorises; NCHW max pooling
// walks a strided window per channel instead (the reason PyTorch's NCHW max pooling is half of
// GoogLeNet's forward time here). Semantics as kernels/common/pool.h (max: first maximal tap, NaN
// wins, indices h * iw + w; avg: PyTorch's divisors).
//   tests: ctest --test-dir build -R pool
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/cpu/native/pool.h"

namespace kiln::native {
namespace {

// Values first with a branch-free select per channel; which tap won is kept as a 32-bit ordinal
// (same lane width as float, so the select vectorises) and turned into PyTorch's h * iw + w
// index once per output pixel.
template <class T>
void max_fwd(const PoolDesc& d, const T* src, T* dst, int64_t* index) {
  const int64_t C = d.c, rows = d.n * d.oh;
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d.ow * C)), [&](int64_t b, int64_t e) {
    std::vector<int32_t> won(static_cast<size_t>(C));
    std::vector<int64_t> taps(static_cast<size_t>(d.kh * d.kw));
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / d.oh, oy = row % d.oh;
      const T* img = src + n * d.ih * d.iw * C;
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        T* out = dst + ((n * d.oh + oy) * d.ow + ox) * C;
        const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
        int32_t ntap = 0;
        for (int64_t i = 0; i < d.kh; ++i) {
          const int64_t h = h0 + i * d.dh;
          if (h < 0 || h >= d.ih) continue;
          for (int64_t j = 0; j < d.kw; ++j) {
            const int64_t w = w0 + j * d.dw;
            if (w < 0 || w >= d.iw) continue;
            const int64_t tap = h * d.iw + w;
            const T* v = img + tap * C;
            taps[size_t(ntap)] = tap;
            if (ntap == 0) {  // the first tap seeds the values (an all -inf window points at it)
              std::memcpy(out, v, sizeof(T) * size_t(C));
              if (index) std::fill(won.begin(), won.end(), 0);
            } else if (index) {
              int32_t* wp = won.data();
              const int32_t k = ntap;
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) {  // later taps win when larger, or NaN (x != x)
                const T x = v[c];
                const bool take = x > out[c] || x != x;
                out[c] = take ? x : out[c];
                wp[c] = take ? k : wp[c];
              }
            } else {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) {
                const T x = v[c];
                out[c] = (x > out[c] || x != x) ? x : out[c];
              }
            }
            ++ntap;
          }
        }
        int64_t* idx = index ? index + ((n * d.oh + oy) * d.ow + ox) * C : nullptr;
        if (ntap == 0) {  // a window entirely in the padding
          std::fill(out, out + C, -std::numeric_limits<T>::infinity());
          if (idx) std::fill(idx, idx + C, int64_t(-1));
        } else if (idx) {
          for (int64_t c = 0; c < C; ++c) idx[c] = taps[size_t(won[size_t(c)])];
        }
      }
    }
  });
}

template <class T>
void avg_fwd(const PoolDesc& d, const T* src, T* dst) {
  const int64_t C = d.c, rows = d.n * d.oh;
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d.ow * C)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / d.oh, oy = row % d.oh;
      const T* img = src + n * d.ih * d.iw * C;
      const int64_t h0 = oy * d.sh - d.ph, h1 = std::min(h0 + d.kh, d.ih + d.ph);
      const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, d.ih);
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        T* out = dst + ((n * d.oh + oy) * d.ow + ox) * C;
        const int64_t w0 = ox * d.sw - d.pw, w1 = std::min(w0 + d.kw, d.iw + d.pw);
        const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, d.iw);
        std::fill(out, out + C, T(0));
        if (hs >= he || ws >= we) continue;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) {
            const T* v = img + (h * d.iw + w) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) out[c] += v[c];
          }
        const int64_t div = d.divisor_override > 0 ? d.divisor_override
                            : d.count_include_pad  ? (h1 - h0) * (w1 - w0)
                                                   : (he - hs) * (we - ws);
        const T inv = T(1) / T(div);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] *= inv;
      }
    }
  });
}

// Images are independent: one thread per image range, scattering into its own diff_src slab.
template <class T>
void pool_bwd(const PoolDesc& d, const T* diff_dst, const int64_t* index, T* diff_src) {
  const int64_t C = d.c, isz = d.ih * d.iw * C, osz = d.oh * d.ow * C;
  parallel_for(0, d.n, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      T* ds = diff_src + n * isz;
      const T* g = diff_dst + n * osz;
      std::fill(ds, ds + isz, T(0));
      for (int64_t oy = 0; oy < d.oh; ++oy)
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          const int64_t o = (oy * d.ow + ox) * C;
          if (d.alg == PoolAlg::max) {
            const int64_t* idx = index + n * osz + o;
            for (int64_t c = 0; c < C; ++c)
              if (idx[c] >= 0) ds[idx[c] * C + c] += g[o + c];
            continue;
          }
          const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
          const int64_t h1 = std::min(h0 + d.kh, d.ih + d.ph), w1 = std::min(w0 + d.kw, d.iw + d.pw);
          const int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
          const int64_t he = std::min(h1, d.ih), we = std::min(w1, d.iw);
          if (hs >= he || ws >= we) continue;
          const int64_t div = d.divisor_override > 0 ? d.divisor_override
                              : d.count_include_pad  ? (h1 - h0) * (w1 - w0)
                                                     : (he - hs) * (we - ws);
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) {
              T* out = ds + (h * d.iw + w) * C;
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) out[c] += g[o + c] / T(div);
            }
        }
    }
  });
}

}  // namespace

void pool_fwd_nhwc(const PoolDesc& d, const void* src, void* dst, int64_t* index) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    if (d.alg == PoolAlg::max) max_fwd(d, static_cast<const T*>(src), static_cast<T*>(dst), index);
    else avg_fwd(d, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}

void pool_bwd_nhwc(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    pool_bwd(d, static_cast<const T*>(diff_dst), index, static_cast<T*>(diff_src));
  });
}

}  // namespace kiln::native
