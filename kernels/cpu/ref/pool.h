// Reference pooling and LRN kernels: direct loops over every output and window tap, in the order
// PyTorch scans them (rows, then columns), templated so the tests run them in double.
//   tests: ctest --test-dir build -R pool
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/pool.h"

namespace kiln::ref {

template <class T>
void pool_fwd(const PoolDesc& d, const T* src, T* dst, int64_t* index) {
  for (int64_t p = 0; p < d.planes(); ++p) {
    auto s = [&](int64_t h, int64_t w) { return src[d.at(p, h, w, d.ih, d.iw)]; };
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const int64_t o = d.at(p, oy, ox, d.oh, d.ow);
        const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
        if (d.alg == PoolAlg::max) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t bi = -1;
          for (int64_t i = 0; i < d.kh; ++i) {
            const int64_t h = h0 + i * d.dh;
            if (h < 0 || h >= d.ih) continue;
            for (int64_t j = 0; j < d.kw; ++j) {
              const int64_t w = w0 + j * d.dw;
              if (w < 0 || w >= d.iw) continue;
              const T v = s(h, w);
              if (bi < 0) bi = h * d.iw + w;  // an all -inf window points at its first tap
              if (v > best || std::isnan(v)) { best = v; bi = h * d.iw + w; }
            }
          }
          dst[o] = best;
          if (index) index[o] = bi;
        } else {
          const int64_t h1 = std::min(h0 + d.kh, d.ih + d.ph), w1 = std::min(w0 + d.kw, d.iw + d.pw);
          const int64_t pool = (h1 - h0) * (w1 - w0);
          const int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
          const int64_t he = std::min(h1, d.ih), we = std::min(w1, d.iw);
          if (hs >= he || ws >= we) { dst[o] = T(0); continue; }
          T sum = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) sum += s(h, w);
          const int64_t div = d.divisor_override > 0 ? d.divisor_override
                              : d.count_include_pad  ? pool
                                                     : (he - hs) * (we - ws);
          dst[o] = sum / T(div);
        }
      }
  }
}

template <class T>
void pool_bwd(const PoolDesc& d, const T* diff_dst, const int64_t* index, T* diff_src) {
  std::memset(static_cast<void*>(diff_src), 0, sizeof(T) * size_t(d.planes() * d.ih * d.iw));
  for (int64_t p = 0; p < d.planes(); ++p) {
    auto ds = [&](int64_t h, int64_t w) -> T& { return diff_src[d.at(p, h, w, d.ih, d.iw)]; };
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const int64_t o = d.at(p, oy, ox, d.oh, d.ow);
        if (d.alg == PoolAlg::max) {
          if (index[o] >= 0) ds(index[o] / d.iw, index[o] % d.iw) += diff_dst[o];
          continue;
        }
        const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
        const int64_t h1 = std::min(h0 + d.kh, d.ih + d.ph), w1 = std::min(w0 + d.kw, d.iw + d.pw);
        const int64_t pool = (h1 - h0) * (w1 - w0);
        const int64_t hs = std::max<int64_t>(h0, 0), ws = std::max<int64_t>(w0, 0);
        const int64_t he = std::min(h1, d.ih), we = std::min(w1, d.iw);
        if (hs >= he || ws >= we) continue;
        const int64_t div = d.divisor_override > 0 ? d.divisor_override
                            : d.count_include_pad  ? pool
                                                   : (he - hs) * (we - ws);
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) ds(h, w) += diff_dst[o] / T(div);
      }
  }
}

template <class T>
void adaptive_pool_fwd(const AdaptivePoolDesc& d, const T* src, T* dst, int64_t* index) {
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  for (int64_t p = 0; p < d.planes(); ++p)
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const T* s = src + p * isz;
        const int64_t o = p * osz + oy * d.ow + ox;
        const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
        const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
        if (d.alg == PoolAlg::avg) {
          T sum = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) sum += s[h * d.iw + w];
          dst[o] = sum / T((he - hs) * (we - ws));
        } else {
          T best = -std::numeric_limits<T>::infinity();
          int64_t bi = hs * d.iw + ws;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) {
              const T v = s[h * d.iw + w];
              if (v > best || std::isnan(v)) { best = v; bi = h * d.iw + w; }
            }
          dst[o] = best;
          index[o] = bi;
        }
      }
}

template <class T>
void adaptive_pool_bwd(const AdaptivePoolDesc& d, const T* diff_dst, const int64_t* index, T* diff_src) {
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  std::memset(static_cast<void*>(diff_src), 0, sizeof(T) * size_t(d.planes() * isz));
  for (int64_t p = 0; p < d.planes(); ++p)
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        T* ds = diff_src + p * isz;
        const int64_t o = p * osz + oy * d.ow + ox;
        if (d.alg == PoolAlg::max) {
          ds[index[o]] += diff_dst[o];
          continue;
        }
        const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
        const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
        const T g = diff_dst[o] / T((he - hs) * (we - ws));
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) ds[h * d.iw + w] += g;
      }
}

template <class T>
void lrn_fwd(const LrnDesc& d, const T* src, T* dst, T* scale) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t i = 0; i < d.inner; ++i) {
        T sum = 0;
        for (int64_t j = c - d.size / 2; j <= c + (d.size - 1) / 2; ++j) {
          if (j < 0 || j >= d.c) continue;
          const T v = src[(n * d.c + j) * d.inner + i];
          sum += v * v;
        }
        const int64_t o = (n * d.c + c) * d.inner + i;
        scale[o] = T(d.k) + T(d.alpha) * (sum / T(d.size));
        dst[o] = src[o] / std::pow(scale[o], T(d.beta));
      }
}

// d src_j = diff_dst_j * scale_j^-beta
//           - 2 beta alpha / size * src_j * sum over outputs i whose window holds j of diff_dst_i dst_i / scale_i
template <class T>
void lrn_bwd(const LrnDesc& d, const T* src, const T* dst, const T* scale, const T* diff_dst, T* diff_src) {
  const T coef = T(2) * T(d.beta) * T(d.alpha) / T(d.size);
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t i = 0; i < d.inner; ++i) {
        T acc = 0;
        for (int64_t j = c - (d.size - 1) / 2; j <= c + d.size / 2; ++j) {
          if (j < 0 || j >= d.c) continue;
          const int64_t q = (n * d.c + j) * d.inner + i;
          acc += diff_dst[q] * dst[q] / scale[q];
        }
        const int64_t o = (n * d.c + c) * d.inner + i;
        diff_src[o] = diff_dst[o] * std::pow(scale[o], -T(d.beta)) - coef * src[o] * acc;
      }
}

}  // namespace kiln::ref
