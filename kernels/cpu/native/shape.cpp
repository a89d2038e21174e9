// kiln's own CPU padding and upsampling kernels (see shape.h for the design).
//   tests: ctest --test-dir build -R shape
#include "kernels/cpu/native/shape.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/parallel.h"

namespace kiln::native {
namespace {

template <class T>
void pad_fwd_t(const PadDesc& d, const T* src, T* dst) {
  // Output columns [x0, x1) read input columns [x0 - left, x1 - left) directly.
  const int64_t x0 = std::min(std::max<int64_t>(d.left, 0), d.ow);
  const int64_t x1 = std::max(x0, std::min(d.ow, d.left + d.iw));
  std::vector<int64_t> border(size_t(d.ow), -1);
  for (int64_t x = 0; x < d.ow; ++x)
    if (x < x0 || x >= x1) border[size_t(x)] = pad_source_index(d.mode, x, d.left, d.iw, d.ow);
  const T value = T(d.value);
  parallel_for(0, d.planes * d.oh, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, d.ow)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t p = r / d.oh, y = r % d.oh;
      T* out = dst + r * d.ow;
      const int64_t sy = pad_source_index(d.mode, y, d.top, d.ih, d.oh);
      if (sy < 0) {
        std::fill(out, out + d.ow, value);
        continue;
      }
      const T* row = src + (p * d.ih + sy) * d.iw;
      if (x1 > x0) std::memcpy(out + x0, row + (x0 - d.left), sizeof(T) * size_t(x1 - x0));
      for (int64_t x = 0; x < d.ow; ++x) {
        if (x == x0) x = x1;
        if (x >= d.ow) break;
        const int64_t sx = border[size_t(x)];
        out[x] = sx < 0 ? value : row[sx];
      }
    }
  });
}

template <class T>
void pad_bwd_t(const PadDesc& d, const T* diff_dst, T* diff_src) {
  const int64_t x0 = std::min(std::max<int64_t>(d.left, 0), d.ow);
  const int64_t x1 = std::max(x0, std::min(d.ow, d.left + d.iw));
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  parallel_for(0, d.planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, isz + osz)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* ds = diff_src + p * isz;
      std::fill(ds, ds + isz, T(0));
      for (int64_t y = 0; y < d.oh; ++y) {
        const int64_t sy = pad_source_index(d.mode, y, d.top, d.ih, d.oh);
        if (sy < 0) continue;
        T* drow = ds + sy * d.iw;
        const T* g = diff_dst + p * osz + y * d.ow;
        const int64_t left = d.left;
#pragma omp simd
        for (int64_t x = x0; x < x1; ++x) drow[x - left] += g[x];
        for (int64_t x = 0; x < d.ow; ++x) {
          if (x == x0) x = x1;
          if (x >= d.ow) break;
          const int64_t sx = pad_source_index(d.mode, x, d.left, d.iw, d.ow);
          if (sx >= 0) drow[sx] += g[x];
        }
      }
    }
  });
}

template <class T>
std::vector<LinearTap<T>> linear_taps(int64_t in, int64_t out, bool align_corners, double scale) {
  std::vector<LinearTap<T>> t;
  t.reserve(size_t(out));
  for (int64_t o = 0; o < out; ++o) t.push_back(linear_tap<T>(o, in, out, align_corners, scale));
  return t;
}

std::vector<int64_t> nearest_taps(int64_t in, int64_t out, double scale) {
  std::vector<int64_t> t;
  t.reserve(size_t(out));
  for (int64_t o = 0; o < out; ++o) t.push_back(nearest_source_index(o, in, out, scale));
  return t;
}

template <class T>
void upsample_fwd_t(const UpsampleDesc& d, const T* src, T* dst) {
  const int64_t isz = d.ih * d.iw;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, d.ow + d.iw));
  if (d.mode == UpsampleMode::nearest) {
    const std::vector<int64_t> ty = nearest_taps(d.ih, d.oh, d.scale_h), tx = nearest_taps(d.iw, d.ow, d.scale_w);
    parallel_for(0, d.planes() * d.oh, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* row = src + (r / d.oh) * isz + ty[size_t(r % d.oh)] * d.iw;
        T* out = dst + r * d.ow;
        for (int64_t x = 0; x < d.ow; ++x) out[x] = row[tx[size_t(x)]];
      }
    });
    return;
  }
  const auto ty = linear_taps<T>(d.ih, d.oh, d.align_corners, d.scale_h);
  const auto tx = linear_taps<T>(d.iw, d.ow, d.align_corners, d.scale_w);
  parallel_for(0, d.planes() * d.oh, grain, [&](int64_t b, int64_t e) {
    std::vector<T> tmp(static_cast<size_t>(d.iw));
    T* t = tmp.data();
    for (int64_t r = b; r < e; ++r) {
      const LinearTap<T>& v = ty[size_t(r % d.oh)];
      const T* a = src + (r / d.oh) * isz + v.i0 * d.iw;
      const T* c = src + (r / d.oh) * isz + v.i1 * d.iw;
      const T l0 = v.l0, l1 = v.l1;
#pragma omp simd
      for (int64_t w = 0; w < d.iw; ++w) t[w] = l0 * a[w] + l1 * c[w];
      T* out = dst + r * d.ow;
      for (int64_t x = 0; x < d.ow; ++x) {
        const LinearTap<T>& h = tx[size_t(x)];
        out[x] = h.l0 * t[h.i0] + h.l1 * t[h.i1];
      }
    }
  });
}

template <class T>
void upsample_bwd_t(const UpsampleDesc& d, const T* diff_dst, T* diff_src) {
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, isz + osz));
  if (d.mode == UpsampleMode::nearest) {
    const std::vector<int64_t> ty = nearest_taps(d.ih, d.oh, d.scale_h), tx = nearest_taps(d.iw, d.ow, d.scale_w);
    parallel_for(0, d.planes(), grain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        T* ds = diff_src + p * isz;
        std::fill(ds, ds + isz, T(0));
        for (int64_t y = 0; y < d.oh; ++y) {
          T* drow = ds + ty[size_t(y)] * d.iw;
          const T* g = diff_dst + p * osz + y * d.ow;
          for (int64_t x = 0; x < d.ow; ++x) drow[tx[size_t(x)]] += g[x];
        }
      }
    });
    return;
  }
  const auto ty = linear_taps<T>(d.ih, d.oh, d.align_corners, d.scale_h);
  const auto tx = linear_taps<T>(d.iw, d.ow, d.align_corners, d.scale_w);
  parallel_for(0, d.planes(), grain, [&](int64_t b, int64_t e) {
    std::vector<T> tmp(static_cast<size_t>(d.iw));
    T* t = tmp.data();
    for (int64_t p = b; p < e; ++p) {
      T* ds = diff_src + p * isz;
      std::fill(ds, ds + isz, T(0));
      for (int64_t y = 0; y < d.oh; ++y) {
        // Horizontal scatter of one gradient row, then two unit-stride row updates.
        std::fill(t, t + d.iw, T(0));
        const T* g = diff_dst + p * osz + y * d.ow;
        for (int64_t x = 0; x < d.ow; ++x) {
          const LinearTap<T>& h = tx[size_t(x)];
          t[h.i0] += h.l0 * g[x];
          t[h.i1] += h.l1 * g[x];
        }
        const LinearTap<T>& v = ty[size_t(y)];
        T* r0 = ds + v.i0 * d.iw;
        T* r1 = ds + v.i1 * d.iw;
        const T l0 = v.l0, l1 = v.l1;
        for (int64_t w = 0; w < d.iw; ++w) r0[w] += l0 * t[w];
        for (int64_t w = 0; w < d.iw; ++w) r1[w] += l1 * t[w];
      }
    }
  });
}


}  // namespace

bool supports_pad(const PadDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }
bool supports_upsample(const UpsampleDesc& d) { return d.dtype == DType::float32 || d.dtype == DType::float64; }

void pad_fwd(const PadDesc& d, const void* src, void* dst) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    pad_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}
void pad_bwd(const PadDesc& d, const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    pad_bwd_t(d, static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}
void upsample_fwd(const UpsampleDesc& d, const void* src, void* dst) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    upsample_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}
void upsample_bwd(const UpsampleDesc& d, const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto t) {
    using T = decltype(t);
    upsample_bwd_t(d, static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

}  // namespace kiln::native
