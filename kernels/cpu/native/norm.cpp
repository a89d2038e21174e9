// Native CPU batch norm, dropout and softmax. Design notes:
//  - batch norm statistics: one pass per channel over (x - k), k = the channel's first element,
//    summed in double (the shift keeps E[v^2] - E[v]^2 from cancelling; double keeps the sums
//    exact enough for float32 data); float64 data gets an exact second pass about the mean.
//    Channels are independent tasks, so results do not depend on the thread count.
//  - [N, C] input (S = 1): tasks are blocks of channels and the inner loops run over channels,
//    which are the unit-stride axis there.
//  - softmax with inner > 1 (softmax over channels of NCHW, say): tasks are (outer, block of
//    inner) and every loop runs along inner, so they vectorise without gathers.
#include "kernels/cpu/native/norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/common/parallel.h"
#include "kernels/common/philox.h"

namespace kiln::native {
namespace {

constexpr int64_t kChanBlock = 64;    // channels per task for [N, C]
constexpr int64_t kInnerBlock = 256;  // inner positions per softmax task

// ---------------------------------------------------------------- batch norm forward
struct ChanStats {
  double mean, var, unbiased;
};

ChanStats finish_stats(double shift, double s1, double s2, int64_t m) {
  const double mu = s1 / double(m);
  double var = s2 / double(m) - mu * mu;
  if (var < 0) var = 0;
  return {shift + mu, var, m > 1 ? var * double(m) / double(m - 1) : var};
}

template <class T>
void apply_stats(const BatchNormDesc& d, int64_t c, const ChanStats& st, const T* wei, const T* bias,
                 T* running_mean, T* running_var, T* save_mean, T* save_invstd, T& mu, T& scale, T& shift) {
  double mean = st.mean, var = st.var;
  if (d.training) {
    if (running_mean) running_mean[c] = T((1 - d.momentum) * double(running_mean[c]) + d.momentum * st.mean);
    if (running_var && d.N * d.S > 1)
      running_var[c] = T((1 - d.momentum) * double(running_var[c]) + d.momentum * st.unbiased);
  } else {
    mean = double(running_mean[c]);
    var = double(running_var[c]);
  }
  const double invstd = 1.0 / std::sqrt(var + d.eps);
  save_mean[c] = T(mean);
  save_invstd[c] = T(invstd);
  const double w = wei ? double(wei[c]) : 1.0, b = bias ? double(bias[c]) : 0.0;
  // y = (x - mu) * scale + shift: subtracting the mean first keeps data far from zero exact
  // (x * scale - mean * scale would cancel two large products).
  mu = T(mean);
  scale = T(w * invstd);
  shift = T(b);
}

template <class T>
void bn_fwd_spatial(const BatchNormDesc& d, const T* src, const T* wei, const T* bias, T* rm, T* rv, T* dst,
                    T* save_mean, T* save_invstd) {
  const int64_t N = d.N, C = d.C, S = d.S, m = N * S;
  parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      ChanStats st{0, 0, 0};
      if (d.training) {
        const double k = double(src[c * S]);
        double s1 = 0, s2 = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* x = src + (n * C + c) * S;
#pragma omp simd reduction(+ : s1, s2)
          for (int64_t s = 0; s < S; ++s) {
            const double v = double(x[s]) - k;
            s1 += v;
            s2 += v * v;
          }
        }
        st = finish_stats(k, s1, s2, m);
        if constexpr (std::is_same_v<T, double>) {  // exact second pass about the mean
          double q = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* x = src + (n * C + c) * S;
#pragma omp simd reduction(+ : q)
            for (int64_t s = 0; s < S; ++s) q += (x[s] - st.mean) * (x[s] - st.mean);
          }
          st.var = q / double(m);
          st.unbiased = m > 1 ? q / double(m - 1) : st.var;
        }
      }
      T mu, scale, shift;
      apply_stats(d, c, st, wei, bias, rm, rv, save_mean, save_invstd, mu, scale, shift);
      for (int64_t n = 0; n < N; ++n) {
        const T* x = src + (n * C + c) * S;
        T* y = dst + (n * C + c) * S;
#pragma omp simd
        for (int64_t s = 0; s < S; ++s) y[s] = (x[s] - mu) * scale + shift;
      }
    }
  });
}

template <class T>
void bn_fwd_flat(const BatchNormDesc& d, const T* src, const T* wei, const T* bias, T* rm, T* rv, T* dst,
                 T* save_mean, T* save_invstd) {
  const int64_t N = d.N, C = d.C;
  const int64_t nblk = (C + kChanBlock - 1) / kChanBlock;
  parallel_for(0, nblk, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t c0 = blk * kChanBlock, cn = std::min(kChanBlock, C - c0);
      double k[kChanBlock], s1[kChanBlock] = {}, s2[kChanBlock] = {};
      T mu[kChanBlock], scale[kChanBlock], shift[kChanBlock];
      if (d.training) {
        for (int64_t c = 0; c < cn; ++c) k[c] = double(src[c0 + c]);
        for (int64_t n = 0; n < N; ++n) {
          const T* x = src + n * C + c0;
#pragma omp simd
          for (int64_t c = 0; c < cn; ++c) {
            const double v = double(x[c]) - k[c];
            s1[c] += v;
            s2[c] += v * v;
          }
        }
      }
      for (int64_t c = 0; c < cn; ++c) {
        ChanStats st = d.training ? finish_stats(k[c], s1[c], s2[c], N) : ChanStats{0, 0, 0};
        apply_stats(d, c0 + c, st, wei, bias, rm, rv, save_mean, save_invstd, mu[c], scale[c], shift[c]);
      }
      for (int64_t n = 0; n < N; ++n) {
        const T* x = src + n * C + c0;
        T* y = dst + n * C + c0;
#pragma omp simd
        for (int64_t c = 0; c < cn; ++c) y[c] = (x[c] - mu[c]) * scale[c] + shift[c];
      }
    }
  });
}

// ---------------------------------------------------------------- batch norm backward
// Per channel: dx = a * (dy - mean(dy) - xhat * mean(dy * xhat)) in training, a * dy in eval,
// with a = w * invstd.
template <class T>
void bn_bwd_spatial(const BatchNormDesc& d, const T* src, const T* dy, const T* wei, const T* save_mean,
                    const T* save_invstd, T* dx, T* dw, T* db) {
  const int64_t N = d.N, C = d.C, S = d.S, m = N * S;
  const bool sums = d.training || dw || db;
  parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const double mean = double(save_mean[c]), invstd = double(save_invstd[c]);
      double sdy = 0, sdyx = 0;
      if (sums)
        for (int64_t n = 0; n < N; ++n) {
          const T* x = src + (n * C + c) * S;
          const T* g = dy + (n * C + c) * S;
#pragma omp simd reduction(+ : sdy, sdyx)
          for (int64_t s = 0; s < S; ++s) {
            sdy += double(g[s]);
            sdyx += double(g[s]) * (double(x[s]) - mean);
          }
        }
      sdyx *= invstd;  // sum(dy * xhat)
      if (dw) dw[c] = T(sdyx);
      if (db) db[c] = T(sdy);
      if (!dx) continue;
      const double w = wei ? double(wei[c]) : 1.0;
      const T a = T(w * invstd);
      const T mdy = T(sdy / double(m)), kx = T(invstd * sdyx / double(m)), mu = T(mean);
      for (int64_t n = 0; n < N; ++n) {
        const T* x = src + (n * C + c) * S;
        const T* g = dy + (n * C + c) * S;
        T* o = dx + (n * C + c) * S;
        if (d.training) {
#pragma omp simd
          for (int64_t s = 0; s < S; ++s) o[s] = a * (g[s] - mdy - (x[s] - mu) * kx);
        } else {
#pragma omp simd
          for (int64_t s = 0; s < S; ++s) o[s] = a * g[s];
        }
      }
    }
  });
}

template <class T>
void bn_bwd_flat(const BatchNormDesc& d, const T* src, const T* dy, const T* wei, const T* save_mean,
                 const T* save_invstd, T* dx, T* dw, T* db) {
  const int64_t N = d.N, C = d.C;
  const int64_t nblk = (C + kChanBlock - 1) / kChanBlock;
  parallel_for(0, nblk, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t c0 = blk * kChanBlock, cn = std::min(kChanBlock, C - c0);
      double mean[kChanBlock], sdy[kChanBlock] = {}, sdyx[kChanBlock] = {};
      for (int64_t c = 0; c < cn; ++c) mean[c] = double(save_mean[c0 + c]);
      for (int64_t n = 0; n < N; ++n) {
        const T* x = src + n * C + c0;
        const T* g = dy + n * C + c0;
#pragma omp simd
        for (int64_t c = 0; c < cn; ++c) {
          sdy[c] += double(g[c]);
          sdyx[c] += double(g[c]) * (double(x[c]) - mean[c]);
        }
      }
      T a[kChanBlock], mdy[kChanBlock], kx[kChanBlock], mu[kChanBlock];
      for (int64_t c = 0; c < cn; ++c) {
        const double invstd = double(save_invstd[c0 + c]);
        sdyx[c] *= invstd;
        if (dw) dw[c0 + c] = T(sdyx[c]);
        if (db) db[c0 + c] = T(sdy[c]);
        a[c] = T((wei ? double(wei[c0 + c]) : 1.0) * invstd);
        mdy[c] = d.training ? T(sdy[c] / double(N)) : T(0);
        kx[c] = d.training ? T(invstd * sdyx[c] / double(N)) : T(0);
        mu[c] = T(mean[c]);
      }
      if (!dx) continue;
      for (int64_t n = 0; n < N; ++n) {
        const T* x = src + n * C + c0;
        const T* g = dy + n * C + c0;
        T* o = dx + n * C + c0;
#pragma omp simd
        for (int64_t c = 0; c < cn; ++c) o[c] = a[c] * (g[c] - mdy[c] - (x[c] - mu[c]) * kx[c]);
      }
    }
  });
}

// ---------------------------------------------------------------- dropout
template <class T>
void dropout_fwd_t(const DropoutDesc& d, const T* src, T* dst, uint8_t* mask) {
  const T scale = T(d.scale());
  parallel_for(0, d.n, 1 << 14, [&](int64_t b, int64_t e) {
    int64_t i = b;
    while (i < e) {
      // One Philox call gives the four lanes of counter offset + i/4.
      const Philox4x32 r = philox4x32(d.seed, d.offset + uint64_t(i) / 4);
      for (int lane = int(i % 4); lane < 4 && i < e; ++lane, ++i) {
        const bool keep = double(uint_to_unit_float(r.v[lane])) >= d.p;
        mask[i] = keep ? 1 : 0;
        dst[i] = keep ? src[i] * scale : T(0);
      }
    }
  });
}

template <class T>
void dropout_bwd_t(const DropoutDesc& d, const T* dy, const uint8_t* mask, T* dx) {
  const T scale = T(d.scale());
  parallel_for(0, d.n, 1 << 15, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * (mask[i] ? scale : T(0));
  });
}

// ---------------------------------------------------------------- softmax
template <class T>
void softmax_fwd_rows(const SoftmaxDesc& d, const T* src, T* dst) {
  const int64_t D = d.dim;
  parallel_for(0, d.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, D)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* x = src + o * D;
      T* y = dst + o * D;
      T mx = x[0];
#pragma omp simd reduction(max : mx)
      for (int64_t k = 0; k < D; ++k) mx = std::max(mx, x[k]);
      T sum = 0;
      if (d.log) {
        for (int64_t k = 0; k < D; ++k) sum += std::exp(x[k] - mx);
        const T lse = mx + std::log(sum);
#pragma omp simd
        for (int64_t k = 0; k < D; ++k) y[k] = x[k] - lse;
      } else {
        for (int64_t k = 0; k < D; ++k) {
          const T ex = std::exp(x[k] - mx);
          y[k] = ex;
          sum += ex;
        }
        const T inv = T(1) / sum;
#pragma omp simd
        for (int64_t k = 0; k < D; ++k) y[k] *= inv;
      }
    }
  });
}

template <class T>
void softmax_fwd_blocked(const SoftmaxDesc& d, const T* src, T* dst) {
  const int64_t D = d.dim, I = d.inner;
  const int64_t nblk = (I + kInnerBlock - 1) / kInnerBlock;
  parallel_for(0, d.outer * nblk, 1, [&](int64_t tb, int64_t te) {
    T mx[kInnerBlock], sum[kInnerBlock];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t o = t / nblk, j0 = (t % nblk) * kInnerBlock, w = std::min(kInnerBlock, I - j0);
      const T* x = src + o * D * I + j0;
      T* y = dst + o * D * I + j0;
      for (int64_t j = 0; j < w; ++j) { mx[j] = x[j]; sum[j] = 0; }
      for (int64_t k = 1; k < D; ++k) {
        const T* row = x + k * I;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) mx[j] = std::max(mx[j], row[j]);
      }
      for (int64_t k = 0; k < D; ++k) {
        const T* row = x + k * I;
        T* out = y + k * I;
        for (int64_t j = 0; j < w; ++j) {
          const T ex = std::exp(row[j] - mx[j]);
          if (!d.log) out[j] = ex;
          sum[j] += ex;
        }
      }
      if (d.log) {
        for (int64_t j = 0; j < w; ++j) mx[j] += std::log(sum[j]);  // now the log-sum-exp
        for (int64_t k = 0; k < D; ++k) {
          const T* row = x + k * I;
          T* out = y + k * I;
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) out[j] = row[j] - mx[j];
        }
      } else {
        for (int64_t j = 0; j < w; ++j) sum[j] = T(1) / sum[j];
        for (int64_t k = 0; k < D; ++k) {
          T* out = y + k * I;
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) out[j] *= sum[j];
        }
      }
    }
  });
}

template <class T>
void softmax_bwd_rows(const SoftmaxDesc& d, const T* y, const T* dy, T* dx) {
  const int64_t D = d.dim;
  parallel_for(0, d.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, D)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* yr = y + o * D;
      const T* g = dy + o * D;
      T* out = dx + o * D;
      T acc = 0;
      if (d.log) {
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < D; ++k) acc += g[k];
        for (int64_t k = 0; k < D; ++k) out[k] = g[k] - std::exp(yr[k]) * acc;
      } else {
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < D; ++k) acc += g[k] * yr[k];
#pragma omp simd
        for (int64_t k = 0; k < D; ++k) out[k] = yr[k] * (g[k] - acc);
      }
    }
  });
}

template <class T>
void softmax_bwd_blocked(const SoftmaxDesc& d, const T* y, const T* dy, T* dx) {
  const int64_t D = d.dim, I = d.inner;
  const int64_t nblk = (I + kInnerBlock - 1) / kInnerBlock;
  parallel_for(0, d.outer * nblk, 1, [&](int64_t tb, int64_t te) {
    T acc[kInnerBlock];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t o = t / nblk, j0 = (t % nblk) * kInnerBlock, w = std::min(kInnerBlock, I - j0);
      const int64_t base = o * D * I + j0;
      for (int64_t j = 0; j < w; ++j) acc[j] = 0;
      for (int64_t k = 0; k < D; ++k) {
        const T* g = dy + base + k * I;
        const T* yr = y + base + k * I;
        if (d.log) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) acc[j] += g[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) acc[j] += g[j] * yr[j];
        }
      }
      for (int64_t k = 0; k < D; ++k) {
        const T* g = dy + base + k * I;
        const T* yr = y + base + k * I;
        T* out = dx + base + k * I;
        if (d.log) {
          for (int64_t j = 0; j < w; ++j) out[j] = g[j] - std::exp(yr[j]) * acc[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) out[j] = yr[j] * (g[j] - acc[j]);
        }
      }
    }
  });
}

bool float_or_double(DType t) { return t == DType::float32 || t == DType::float64; }

template <class F>
void visit_float(DType t, F&& f) {
  if (t == DType::float64)
    f(double{});
  else
    f(float{});
}

}  // namespace

bool supports_batch_norm(const BatchNormDesc& d) { return float_or_double(d.dtype); }

void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.S == 1 ? bn_fwd_flat<T> : bn_fwd_spatial<T>;
    fn(d, static_cast<const T*>(src), static_cast<const T*>(wei), static_cast<const T*>(bias),
       static_cast<T*>(running_mean), static_cast<T*>(running_var), static_cast<T*>(dst), static_cast<T*>(save_mean),
       static_cast<T*>(save_invstd));
  });
}

void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.S == 1 ? bn_bwd_flat<T> : bn_bwd_spatial<T>;
    fn(d, static_cast<const T*>(src), static_cast<const T*>(diff_dst), static_cast<const T*>(wei),
       static_cast<const T*>(save_mean), static_cast<const T*>(save_invstd), static_cast<T*>(diff_src),
       static_cast<T*>(diff_wei), static_cast<T*>(diff_bias));
  });
}

bool supports_dropout(const DropoutDesc& d) { return float_or_double(d.dtype); }

void dropout_fwd(const DropoutDesc& d, const void* src, void* dst, uint8_t* mask) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    dropout_fwd_t(d, static_cast<const T*>(src), static_cast<T*>(dst), mask);
  });
}

void dropout_bwd(const DropoutDesc& d, const void* diff_dst, const uint8_t* mask, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    dropout_bwd_t(d, static_cast<const T*>(diff_dst), mask, static_cast<T*>(diff_src));
  });
}

bool supports_softmax(const SoftmaxDesc& d) { return float_or_double(d.dtype) && d.dim > 0; }

void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.inner == 1 ? softmax_fwd_rows<T> : softmax_fwd_blocked<T>;
    fn(d, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}

void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.inner == 1 ? softmax_bwd_rows<T> : softmax_bwd_blocked<T>;
    fn(d, static_cast<const T*>(dst), static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

}  // namespace kiln::native
