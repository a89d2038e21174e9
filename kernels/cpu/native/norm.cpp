// Native CPU batch norm, dropout and softmax. Design notes:
//  - batch norm statistics: one pass per channel over (x - k), k = the channel's first element,
//    summed in double (the shift keeps E[v^2] - E[v]^2 from cancelling; double keeps the sums
//    exact enough for float32 data); float64 data gets an exact second pass about the mean.
//    Channels are independent tasks, so results do not depend on the thread count.
//  - [N, C] input (S = 1): tasks are fixed chunks of rows with per-channel partial sums, added
//    in chunk order, so the inner loops run along the unit-stride channel axis.
//  - softmax with inner > 1 (softmax over channels of NCHW, say): tasks are (outer, block of
//    inner) and every loop runs along inner, so they vectorise without gathers.
#include "kernels/cpu/native/norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/common/philox.h"

namespace kiln::native {
namespace {

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
        if (d.relu) {
#pragma omp simd
          for (int64_t s = 0; s < S; ++s) {
            const T v = (x[s] - mu) * scale + shift;
            y[s] = v > T(0) ? v : T(0);  // the ReLU functor's rule (NaN -> 0)
          }
        } else {
#pragma omp simd
          for (int64_t s = 0; s < S; ++s) y[s] = (x[s] - mu) * scale + shift;
        }
      }
    }
  });
}

// [N, C]: rows are contiguous, so tasks take fixed chunks of rows (the chunking depends on N
// only, never on the thread count) and keep per-channel partial sums that are added in chunk
// order afterwards. Walking channel blocks down the rows instead costs a TLB miss per row.
constexpr int64_t kMaxRowChunks = 64;

int64_t row_chunks(int64_t N) { return std::min<int64_t>(N, kMaxRowChunks); }

// Per-chunk sums over rows [chunk rows) of f(row, c, a, b) into part[chunk][0..C) and
// part[chunk][C..2C), then their in-order totals into a[0..C), b[0..C).
template <class F>
void chunked_channel_sums(int64_t N, int64_t C, const F& f, std::vector<double>& a, std::vector<double>& b) {
  const int64_t nchunk = row_chunks(N), rows = (N + nchunk - 1) / nchunk;
  std::vector<double> part(size_t(nchunk * 2 * C), 0.0);
  parallel_for(0, nchunk, 1, [&](int64_t kb, int64_t ke) {
    for (int64_t k = kb; k < ke; ++k) {
      double* pa = part.data() + k * 2 * C;
      for (int64_t n = k * rows; n < std::min(N, (k + 1) * rows); ++n) f(n, pa, pa + C);
    }
  });
  a.assign(size_t(C), 0.0);
  b.assign(size_t(C), 0.0);
  for (int64_t k = 0; k < nchunk; ++k)
    for (int64_t c = 0; c < C; ++c) {
      a[size_t(c)] += part[size_t(k * 2 * C + c)];
      b[size_t(c)] += part[size_t(k * 2 * C + C + c)];
    }
}

template <class T>
void bn_fwd_flat(const BatchNormDesc& d, const T* src, const T* wei, const T* bias, T* rm, T* rv, T* dst,
                 T* save_mean, T* save_invstd) {
  const int64_t N = d.N, C = d.C;
  std::vector<double> s1, s2;
  std::vector<double> k(static_cast<size_t>(C));
  if (d.training) {
    for (int64_t c = 0; c < C; ++c) k[size_t(c)] = double(src[c]);
    const double* kp = k.data();
    chunked_channel_sums(N, C, [&](int64_t n, double* a, double* b) {
      const T* x = src + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const double v = double(x[c]) - kp[c];
        a[c] += v;
        b[c] += v * v;
      }
    }, s1, s2);
  }
  std::vector<T> mu(static_cast<size_t>(C)), scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const size_t u = size_t(c);
    ChanStats st = d.training ? finish_stats(k[u], s1[u], s2[u], N) : ChanStats{0, 0, 0};
    if constexpr (std::is_same_v<T, double>) {
      if (d.training) {  // exact second pass about the mean (float64 only; strided, but rare)
        double q = 0;
        for (int64_t n = 0; n < N; ++n) q += (src[n * C + c] - st.mean) * (src[n * C + c] - st.mean);
        st.var = q / double(N);
        st.unbiased = N > 1 ? q / double(N - 1) : st.var;
      }
    }
    apply_stats(d, c, st, wei, bias, rm, rv, save_mean, save_invstd, mu[u], scale[u], shift[u]);
  }
  const T *m = mu.data(), *sc = scale.data(), *sh = shift.data();
  parallel_for(0, N, std::max<int64_t>(1, 16384 / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* x = src + n * C;
      T* y = dst + n * C;
      if (d.relu) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const T v = (x[c] - m[c]) * sc[c] + sh[c];
          y[c] = v > T(0) ? v : T(0);
        }
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m[c]) * sc[c] + sh[c];
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
  std::vector<double> mean(static_cast<size_t>(C)), sdy, sdyx;
  for (int64_t c = 0; c < C; ++c) mean[size_t(c)] = double(save_mean[c]);
  const double* mp = mean.data();
  chunked_channel_sums(N, C, [&](int64_t n, double* a, double* b) {
    const T* x = src + n * C;
    const T* g = dy + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      a[c] += double(g[c]);
      b[c] += double(g[c]) * (double(x[c]) - mp[c]);
    }
  }, sdy, sdyx);
  std::vector<T> a(static_cast<size_t>(C)), mdy(static_cast<size_t>(C)), kx(static_cast<size_t>(C)), mu(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const size_t u = size_t(c);
    const double invstd = double(save_invstd[c]);
    sdyx[u] *= invstd;
    if (dw) dw[c] = T(sdyx[u]);
    if (db) db[c] = T(sdy[u]);
    a[u] = T((wei ? double(wei[c]) : 1.0) * invstd);
    mdy[u] = d.training ? T(sdy[u] / double(N)) : T(0);
    kx[u] = d.training ? T(invstd * sdyx[u] / double(N)) : T(0);
    mu[u] = T(mean[u]);
  }
  if (!dx) return;
  const T *ap = a.data(), *mdp = mdy.data(), *kp = kx.data(), *mup = mu.data();
  parallel_for(0, N, std::max<int64_t>(1, 16384 / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* x = src + n * C;
      const T* g = dy + n * C;
      T* o = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = ap[c] * (g[c] - mdp[c] - (x[c] - mup[c]) * kp[c]);
    }
  });
}

// ---------------------------------------------------------------- dropout
// Philox-4x32-10 for kPhiloxBlock consecutive counters at once, lane-parallel (structure of
// arrays) so the 32x32->64 multiplies vectorise; bits[4 j + l] = lane l of counter ctr0 + j,
// which is exactly the draw of element 4 (ctr0 + j) + l (kernels/common/philox.h).
constexpr int64_t kPhiloxBlock = 64;

void philox_block(uint64_t seed, uint64_t ctr0, uint32_t* bits) {
  uint32_t c0[kPhiloxBlock], c1[kPhiloxBlock], c2[kPhiloxBlock], c3[kPhiloxBlock];
  for (int64_t j = 0; j < kPhiloxBlock; ++j) {
    const uint64_t ctr = ctr0 + uint64_t(j);
    c0[j] = uint32_t(ctr);
    c1[j] = uint32_t(ctr >> 32);
    c2[j] = 0;
    c3[j] = 0;
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < kPhiloxBlock; ++j) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[j];
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[j];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[j] ^ k0;
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = uint32_t(p1);
      c3[j] = uint32_t(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int64_t j = 0; j < kPhiloxBlock; ++j) {
    bits[4 * j] = c0[j];
    bits[4 * j + 1] = c1[j];
    bits[4 * j + 2] = c2[j];
    bits[4 * j + 3] = c3[j];
  }
}

template <class T>
void dropout_fwd_t(const DropoutDesc& d, const T* src, T* dst, uint8_t* mask) {
  const T scale = T(d.scale());
  // uniform = (bits >> 8) / 2^24 >= p  <=>  (bits >> 8) >= ceil(p 2^24): an exact integer test
  // (p 2^24 is exact in double), so the mask equals the reference kernel's bit for bit.
  const uint32_t thr = uint32_t(std::ceil(d.p * 16777216.0));
  constexpr int64_t span = 4 * kPhiloxBlock;  // elements per Philox block
  const int64_t nblk = (d.n + span - 1) / span;
  parallel_for(0, nblk, 64, [&](int64_t bb, int64_t be) {
    uint32_t bits[span];
    for (int64_t blk = bb; blk < be; ++blk) {
      philox_block(d.seed, d.offset + uint64_t(blk * kPhiloxBlock), bits);
      const int64_t i0 = blk * span, w = std::min(span, d.n - i0);
      const T* x = src + i0;
      T* y = dst + i0;
      uint8_t* m = mask + i0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        const uint32_t keep = (bits[j] >> 8) >= thr ? 1u : 0u;
        m[j] = uint8_t(keep);
        y[j] = x[j] * (T(int32_t(keep)) * scale);  // x * mask * scale, as PyTorch (inf * 0 = NaN)
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


}  // namespace

bool supports_batch_norm(const BatchNormDesc& d) { return float_or_double(d.dtype); }

namespace {
// Channels-last [N, S, C] is the flat [N*S, C] case: channels vectorise, rows parallelise.
BatchNormDesc as_flat(const BatchNormDesc& d) {
  if (!d.nhwc) return d;
  BatchNormDesc f = d;
  f.N = d.N * d.S;
  f.S = 1;
  f.nhwc = false;
  return f;
}
}  // namespace

void batch_norm_fwd(const BatchNormDesc& d0, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd) {
  const BatchNormDesc d = as_flat(d0);
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.S == 1 ? bn_fwd_flat<T> : bn_fwd_spatial<T>;
    fn(d, static_cast<const T*>(src), static_cast<const T*>(wei), static_cast<const T*>(bias),
       static_cast<T*>(running_mean), static_cast<T*>(running_var), static_cast<T*>(dst), static_cast<T*>(save_mean),
       static_cast<T*>(save_invstd));
  });
}

void batch_norm_bwd(const BatchNormDesc& d0, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias) {
  const BatchNormDesc d = as_flat(d0);
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
