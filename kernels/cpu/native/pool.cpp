// kiln's own CPU pooling and LRN kernels (see pool.h for the design).
//   tests: ctest --test-dir build -R pool
#include "kernels/cpu/native/pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/parallel.h"


namespace kiln::native {
namespace {

// Output columns [lo, hi) whose whole window (taps at ox*s - p + j*dil) lies inside [0, in).
struct Range {
  int64_t lo, hi;
};
Range interior(int64_t out, int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil) {
  int64_t lo = std::min((p + s - 1) / s, out);
  const int64_t last = in - 1 + p - (k - 1) * dil;
  int64_t hi = last >= 0 ? std::min(last / s + 1, out) : 0;
  return {lo, std::max(lo, hi)};
}

// Per output column of avg pooling: window clipped to the image [ws, we), and the two divisor
// widths (clipped to the padded image / to the image).
struct AvgCols {
  std::vector<int64_t> ws, we, pool, valid;
};
AvgCols avg_cols(const PoolDesc& d) {
  AvgCols c;
  for (int64_t ox = 0; ox < d.ow; ++ox) {
    const int64_t w0 = ox * d.sw - d.pw, w1 = std::min(w0 + d.kw, d.iw + d.pw);
    const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, d.iw);
    c.ws.push_back(ws);
    c.we.push_back(we);
    c.pool.push_back(w1 - w0);
    c.valid.push_back(we - ws);
  }
  return c;
}

// One output with bounds checks (border columns), taps in PyTorch's order; an all -inf window
// points at its first tap, like the reference.
template <class T>
void max_window(const PoolDesc& d, const T* s, int64_t h0, int64_t w0, T& best, int64_t& bi) {
  best = -std::numeric_limits<T>::infinity();
  bi = -1;
  for (int64_t i = 0; i < d.kh; ++i) {
    const int64_t h = h0 + i * d.dh;
    if (h < 0 || h >= d.ih) continue;
    for (int64_t j = 0; j < d.kw; ++j) {
      const int64_t w = w0 + j * d.dw;
      if (w < 0 || w >= d.iw) continue;
      const T v = s[h * d.iw + w];
      if (bi < 0 || v > best || v != v) {
        best = v;
        bi = h * d.iw + w;
      }
    }
  }
}

// One tap for all interior outputs of a row: best[ox] = max(best[ox], row[ox * S + off]) with
// NaN winning, and the winning tap number kept in `tap` (as T, so the select vectorises with the
// values; exact for any window size below 2^24). S = 0 means the runtime stride `sw`.
template <int S, class T>
void max_tap_row(const T* row, int64_t off, int64_t sw, int64_t lo, int64_t hi, T t, T* best, T* tap) {
  const int64_t st = S ? S : sw;
  if (tap) {
    for (int64_t ox = lo; ox < hi; ++ox) {
      const T v = row[ox * st + off], b = best[ox], p = tap[ox];
      const bool take = (v > b) | (v != v);  // no short circuit: keeps the loop branch-free
      best[ox] = take ? v : b;
      tap[ox] = take ? t : p;
    }
  } else {
    for (int64_t ox = lo; ox < hi; ++ox) {
      const T v = row[ox * st + off], b = best[ox];
      best[ox] = ((v > b) | (v != v)) ? v : b;
    }
  }
}

// One output row. Border columns go through max_window; interior columns (whole window inside
// the image width) run tap by tap over the row with no bounds checks. oi == nullptr: values only.
template <class T>
void max_row(const PoolDesc& d, const T* s, int64_t oy, T* out, int64_t* oi, Range r, T* tap) {
  const int64_t h0 = oy * d.sh - d.ph;
  for (int64_t ox = 0; ox < d.ow; ++ox) {
    if (ox == r.lo) ox = r.hi;
    if (ox >= d.ow) break;
    int64_t bi;
    max_window(d, s, h0, ox * d.sw - d.pw, out[ox], bi);
    if (oi) oi[ox] = bi;
  }
  if (r.lo >= r.hi) return;
  int64_t i0 = 0;
  while (i0 < d.kh && h0 + i0 * d.dh < 0) ++i0;
  if (i0 == d.kh || h0 + i0 * d.dh >= d.ih) {  // the window holds no image row
    for (int64_t ox = r.lo; ox < r.hi; ++ox) {
      out[ox] = -std::numeric_limits<T>::infinity();
      if (oi) oi[ox] = -1;
    }
    return;
  }
  T* tp = oi ? tap : nullptr;
  {
    const T* row = s + (h0 + i0 * d.dh) * d.iw;
    for (int64_t ox = r.lo; ox < r.hi; ++ox) out[ox] = row[ox * d.sw - d.pw];
    if (tp)
      for (int64_t ox = r.lo; ox < r.hi; ++ox) tp[ox] = T(i0 * d.kw);
  }
  for (int64_t i = i0; i < d.kh; ++i) {
    const int64_t h = h0 + i * d.dh;
    if (h >= d.ih) break;
    const T* row = s + h * d.iw;
    for (int64_t j = (i == i0 ? 1 : 0); j < d.kw; ++j) {
      const int64_t off = j * d.dw - d.pw;
      const T t = T(i * d.kw + j);
      if (d.sw == 1) max_tap_row<1>(row, off, 1, r.lo, r.hi, t, out, tp);
      else if (d.sw == 2) max_tap_row<2>(row, off, 2, r.lo, r.hi, t, out, tp);
      else max_tap_row<0>(row, off, d.sw, r.lo, r.hi, t, out, tp);
    }
  }
  if (oi)
    for (int64_t ox = r.lo; ox < r.hi; ++ox) {
      const int64_t t = int64_t(tp[ox]), i = t / d.kw, j = t % d.kw;
      oi[ox] = (h0 + i * d.dh) * d.iw + ox * d.sw - d.pw + j * d.dw;
    }
}

template <class T>
inline int64_t avg_divisor(const PoolDesc& d, const AvgCols& c, int64_t ox, int64_t rows_pool, int64_t rows_valid) {
  if (d.divisor_override > 0) return d.divisor_override;
  return d.count_include_pad ? rows_pool * c.pool[size_t(ox)] : rows_valid * c.valid[size_t(ox)];
}

// Sums rows [hs, he) of a plane into acc[0, iw): unit-stride adds.
template <class T>
void sum_rows(const T* s, int64_t iw, int64_t hs, int64_t he, T* acc) {
  std::memcpy(acc, s + hs * iw, sizeof(T) * size_t(iw));
  for (int64_t h = hs + 1; h < he; ++h) {
    const T* row = s + h * iw;
#pragma omp simd
    for (int64_t w = 0; w < iw; ++w) acc[w] += row[w];
  }
}

template <class T>
void avg_row(const PoolDesc& d, const AvgCols& c, Range r, const T* s, int64_t oy, T* out, T* acc) {
  const int64_t h0 = oy * d.sh - d.ph, h1 = std::min(h0 + d.kh, d.ih + d.ph);
  const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, d.ih);
  std::fill(out, out + d.ow, T(0));
  if (hs >= he) return;
  sum_rows(s, d.iw, hs, he, acc);
  for (int64_t j = 0; j < d.kw; ++j) {
    const int64_t off = j - d.pw, sw = d.sw;
#pragma omp simd
    for (int64_t ox = r.lo; ox < r.hi; ++ox) out[ox] += acc[ox * sw + off];
  }
  for (int64_t ox = 0; ox < d.ow; ++ox) {
    if (ox == r.lo) ox = r.hi;
    if (ox >= d.ow) break;
    for (int64_t w = c.ws[size_t(ox)]; w < c.we[size_t(ox)]; ++w) out[ox] += acc[w];
  }
  for (int64_t ox = 0; ox < d.ow; ++ox)
    out[ox] = c.valid[size_t(ox)] > 0 ? out[ox] / T(avg_divisor<T>(d, c, ox, h1 - h0, he - hs)) : T(0);
}

template <class T>
void pool_fwd_t(const PoolDesc& d, const T* src, T* dst, int64_t* index) {
  const int64_t isz = d.ih * d.iw;
  const int64_t rows = d.planes() * d.oh;
  const int64_t work = std::max<int64_t>(1, d.ow * d.kh * d.kw);
  const int64_t grain = std::max<int64_t>(1, 16384 / work);
  if (d.alg == PoolAlg::max) {
    const Range r = interior(d.ow, d.iw, d.kw, d.sw, d.pw, d.dw);
    parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      std::vector<T> tap(static_cast<size_t>(d.ow));
      for (int64_t k = b; k < e; ++k)
        max_row(d, src + (k / d.oh) * isz, k % d.oh, dst + k * d.ow, index ? index + k * d.ow : nullptr, r,
                tap.data());
    });
    return;
  }
  const AvgCols c = avg_cols(d);
  const Range r = interior(d.ow, d.iw, d.kw, d.sw, d.pw, 1);
  parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
    std::vector<T> acc(static_cast<size_t>(d.iw));
    for (int64_t k = b; k < e; ++k) avg_row(d, c, r, src + (k / d.oh) * isz, k % d.oh, dst + k * d.ow, acc.data());
  });
}

template <class T>
void pool_bwd_t(const PoolDesc& d, const T* diff_dst, const int64_t* index, T* diff_src) {
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, isz + osz * d.kh * d.kw));
  const AvgCols c = d.alg == PoolAlg::avg ? avg_cols(d) : AvgCols{};
  const Range r = interior(d.ow, d.iw, d.kw, d.sw, d.pw, 1);
  parallel_for(0, d.planes(), grain, [&](int64_t b, int64_t e) {
    std::vector<T> gs(static_cast<size_t>(d.ow)), hb(static_cast<size_t>(d.iw));
    for (int64_t p = b; p < e; ++p) {
      T* ds = diff_src + p * isz;
      const T* g = diff_dst + p * osz;
      std::fill(ds, ds + isz, T(0));
      if (d.alg == PoolAlg::max) {
        const int64_t* idx = index + p * osz;
        for (int64_t o = 0; o < osz; ++o)
          if (idx[o] >= 0) ds[idx[o]] += g[o];
        continue;
      }
      for (int64_t oy = 0; oy < d.oh; ++oy) {
        const int64_t h0 = oy * d.sh - d.ph, h1 = std::min(h0 + d.kh, d.ih + d.ph);
        const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, d.ih);
        if (hs >= he) continue;
        const T* grow = g + oy * d.ow;
        for (int64_t ox = 0; ox < d.ow; ++ox)
          gs[size_t(ox)] = c.valid[size_t(ox)] > 0 ? grow[ox] / T(avg_divisor<T>(d, c, ox, h1 - h0, he - hs)) : T(0);
        std::fill(hb.begin(), hb.end(), T(0));
        T* hbp = hb.data();
        const T* gsp = gs.data();
        for (int64_t j = 0; j < d.kw; ++j) {
          const int64_t off = j - d.pw, sw = d.sw;
          // Distinct ox write distinct columns for a fixed tap j, so the loop carries no dependence.
#pragma omp simd
          for (int64_t ox = r.lo; ox < r.hi; ++ox) hbp[ox * sw + off] += gsp[ox];
        }
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          if (ox == r.lo) ox = r.hi;
          if (ox >= d.ow) break;
          for (int64_t w = c.ws[size_t(ox)]; w < c.we[size_t(ox)]; ++w) hbp[w] += gsp[ox];
        }
        for (int64_t h = hs; h < he; ++h) {
          T* row = ds + h * d.iw;
#pragma omp simd
          for (int64_t w = 0; w < d.iw; ++w) row[w] += hbp[w];
        }
      }
    }
  });
}

template <class T>
void adaptive_fwd_t(const AdaptivePoolDesc& d, const T* src, T* dst, int64_t* index) {
  const int64_t isz = d.ih * d.iw;
  if (d.alg == PoolAlg::avg && d.oh == 1 && d.ow == 1) {  // global average (ResNet heads): one sum per plane
    parallel_for(0, d.planes(), std::max<int64_t>(1, 16384 / std::max<int64_t>(1, isz)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T* s = src + p * isz;
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < isz; ++i) sum += s[i];
        dst[p] = sum / T(isz);
      }
    });
    return;
  }
  const int64_t rows = d.planes() * d.oh;
  const int64_t per_row = std::max<int64_t>(1, d.iw * ((d.ih + d.oh - 1) / d.oh + 1));
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / per_row), [&](int64_t b, int64_t e) {
    std::vector<T> acc(static_cast<size_t>(d.iw));
    for (int64_t k = b; k < e; ++k) {
      const T* s = src + (k / d.oh) * isz;
      const int64_t oy = k % d.oh;
      const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
      T* out = dst + k * d.ow;
      if (d.alg == PoolAlg::avg) {
        sum_rows(s, d.iw, hs, he, acc.data());
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
          T sum = 0;
          for (int64_t w = ws; w < we; ++w) sum += acc[size_t(w)];
          out[ox] = sum / T((he - hs) * (we - ws));
        }
        continue;
      }
      int64_t* oi = index + k * d.ow;
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
        T best = -std::numeric_limits<T>::infinity();
        int64_t bi = hs * d.iw + ws;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) {
            const T v = s[h * d.iw + w];
            if (v > best || v != v) { best = v; bi = h * d.iw + w; }
          }
        out[ox] = best;
        oi[ox] = bi;
      }
    }
  });
}

template <class T>
void adaptive_bwd_t(const AdaptivePoolDesc& d, const T* diff_dst, const int64_t* index, T* diff_src) {
  const int64_t isz = d.ih * d.iw, osz = d.oh * d.ow;
  if (d.alg == PoolAlg::avg && d.oh == 1 && d.ow == 1) {
    parallel_for(0, d.planes(), std::max<int64_t>(1, 16384 / std::max<int64_t>(1, isz)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) std::fill(diff_src + p * isz, diff_src + (p + 1) * isz, diff_dst[p] / T(isz));
    });
    return;
  }
  parallel_for(0, d.planes(), std::max<int64_t>(1, 16384 / std::max<int64_t>(1, 2 * isz)), [&](int64_t b, int64_t e) {
    std::vector<T> hb(static_cast<size_t>(d.iw));
    for (int64_t p = b; p < e; ++p) {
      T* ds = diff_src + p * isz;
      const T* g = diff_dst + p * osz;
      std::fill(ds, ds + isz, T(0));
      if (d.alg == PoolAlg::max) {
        const int64_t* idx = index + p * osz;
        for (int64_t o = 0; o < osz; ++o) ds[idx[o]] += g[o];
        continue;
      }
      for (int64_t oy = 0; oy < d.oh; ++oy) {
        const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
        std::fill(hb.begin(), hb.end(), T(0));
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
          const T gv = g[oy * d.ow + ox] / T((he - hs) * (we - ws));
          for (int64_t w = ws; w < we; ++w) hb[size_t(w)] += gv;
        }
        for (int64_t h = hs; h < he; ++h) {
          T* row = ds + h * d.iw;
          const T* hbp = hb.data();
#pragma omp simd
          for (int64_t w = 0; w < d.iw; ++w) row[w] += hbp[w];
        }
      }
    }
  });
}

// s^-0.75 = 1 / (sqrt(s) * sqrt(sqrt(s))) for beta = 0.75 (AlexNet, GoogLeNet): two square
// roots vectorise (the kernels build with -fno-math-errno), where pow stays a scalar call.
template <class T>
inline void neg_pow_075(const T* s, T* r, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T q = std::sqrt(s[i]);
    r[i] = T(1) / (q * std::sqrt(q));
  }
}

// scale^-beta
template <class T>
void neg_pow(const T* s, T* r, int64_t n, double beta) {
  if (beta == 0.75) {
    neg_pow_075(s, r, n);
  } else {
    for (int64_t i = 0; i < n; ++i) r[i] = std::pow(s[i], T(-beta));
  }
}

template <class T>
void lrn_fwd_t(const LrnDesc& d, const T* src, T* dst, T* scale) {
  const int64_t in = d.inner;
  parallel_for(0, d.n * d.c, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, in * d.size)), [&](int64_t b, int64_t e) {
    std::vector<T> acc(static_cast<size_t>(in)), r(static_cast<size_t>(in));
    for (int64_t pc = b; pc < e; ++pc) {
      const int64_t n = pc / d.c, c = pc % d.c;
      T* a = acc.data();
      std::fill(a, a + in, T(0));
      const int64_t j0 = std::max<int64_t>(0, c - d.size / 2), j1 = std::min(d.c - 1, c + (d.size - 1) / 2);
      for (int64_t j = j0; j <= j1; ++j) {
        const T* x = src + (n * d.c + j) * in;
#pragma omp simd
        for (int64_t i = 0; i < in; ++i) a[i] += x[i] * x[i];
      }
      T* sc = scale + pc * in;
      const T alpha = T(d.alpha), k = T(d.k), size = T(d.size);
#pragma omp simd
      for (int64_t i = 0; i < in; ++i) sc[i] = k + alpha * (a[i] / size);
      neg_pow(sc, r.data(), in, d.beta);
      const T* x = src + pc * in;
      T* y = dst + pc * in;
      const T* rp = r.data();
#pragma omp simd
      for (int64_t i = 0; i < in; ++i) y[i] = x[i] * rp[i];
    }
  });
}

template <class T>
void lrn_bwd_t(const LrnDesc& d, const T* src, const T* dst, const T* scale, const T* diff_dst, T* diff_src) {
  const int64_t in = d.inner;
  const T coef = T(2) * T(d.beta) * T(d.alpha) / T(d.size);
  parallel_for(0, d.n * d.c, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, in * d.size)), [&](int64_t b, int64_t e) {
    std::vector<T> acc(static_cast<size_t>(in)), r(static_cast<size_t>(in));
    for (int64_t pc = b; pc < e; ++pc) {
      const int64_t n = pc / d.c, c = pc % d.c;
      T* a = acc.data();
      std::fill(a, a + in, T(0));
      // Outputs whose window holds channel c.
      const int64_t j0 = std::max<int64_t>(0, c - (d.size - 1) / 2), j1 = std::min(d.c - 1, c + d.size / 2);
      for (int64_t j = j0; j <= j1; ++j) {
        const int64_t q = (n * d.c + j) * in;
        const T *g = diff_dst + q, *y = dst + q, *s = scale + q;
#pragma omp simd
        for (int64_t i = 0; i < in; ++i) a[i] += g[i] * y[i] / s[i];
      }
      neg_pow(scale + pc * in, r.data(), in, d.beta);
      const T *x = src + pc * in, *g = diff_dst + pc * in, *rp = r.data();
      T* dx = diff_src + pc * in;
#pragma omp simd
      for (int64_t i = 0; i < in; ++i) dx[i] = g[i] * rp[i] - coef * x[i] * a[i];
    }
  });
}

bool float_types(DType t) { return t == DType::float32 || t == DType::float64; }

}  // namespace

bool supports_pool(const PoolDesc& d) { return float_types(d.dtype); }
bool supports_adaptive_pool(const AdaptivePoolDesc& d) { return float_types(d.dtype); }
bool supports_lrn(const LrnDesc& d) { return float_types(d.dtype); }

#define KILN_POOL_BOTH(dtype, call) visit_float(dtype, [&](auto t) { using T = decltype(t); call; })

void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index) {
  if (d.nhwc) return pool_fwd_nhwc(d, src, dst, index);
  KILN_POOL_BOTH(d.dtype, pool_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst), index));
}
void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  if (d.nhwc) return pool_bwd_nhwc(d, diff_dst, index, diff_src);
  KILN_POOL_BOTH(d.dtype, pool_bwd_t(d, static_cast<const T*>(diff_dst), index, static_cast<T*>(diff_src)));
}
void adaptive_pool_fwd(const AdaptivePoolDesc& d, const void* src, void* dst, int64_t* index) {
  KILN_POOL_BOTH(d.dtype, adaptive_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst), index));
}
void adaptive_pool_bwd(const AdaptivePoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  KILN_POOL_BOTH(d.dtype, adaptive_bwd_t(d, static_cast<const T*>(diff_dst), index, static_cast<T*>(diff_src)));
}
void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale) {
  KILN_POOL_BOTH(d.dtype, lrn_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst), static_cast<T*>(scale)));
}
void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src) {
  KILN_POOL_BOTH(d.dtype, lrn_bwd_t(d, static_cast<const T*>(src), static_cast<const T*>(dst),
                                    static_cast<const T*>(scale), static_cast<const T*>(diff_dst),
                                    static_cast<T*>(diff_src)));
}

}  // namespace kiln::native
