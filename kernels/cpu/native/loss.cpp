// Native CPU losses. Cross-entropy forward computes, per sample, the log-sum-exp (saved for the
// backward), and loss = lse - (1 - eps) x[t] - eps / C * sum_c x[c], which is the smoothed NLL of
// log-softmax without materialising log-probs. [N, C] inputs run one row per sample; [N, C, S]
// inputs (segmentation) run blocks of S positions so every loop is unit-stride along S.
#include "kernels/cpu/native/loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common/parallel.h"

namespace kiln::native {
namespace {

constexpr int64_t kReduceBlock = 4096;  // fixed blocks: the sum's rounding ignores thread count
constexpr int64_t kInnerBlock = 256;

template <class T>
void finish_class(const ClassLossDesc& d, const std::vector<double>& loss, int64_t count, T* dst) {
  const int64_t m = int64_t(loss.size());
  if (d.reduction == Reduction::none) {
    for (int64_t i = 0; i < m; ++i) dst[i] = T(loss[i]);
    return;
  }
  double acc = 0;
  for (double v : loss) acc += v;
  dst[0] = T(d.reduction == Reduction::sum ? acc : acc / double(count));
}

int64_t count_targets(const ClassLossDesc& d, const int64_t* target) {
  int64_t count = 0;
  for (int64_t i = 0; i < d.N * d.S; ++i) count += target[i] != d.ignore_index;
  return count;
}

// Per-sample gradient scale g_i (0 for ignored targets).
template <class T>
struct GradScale {
  const ClassLossDesc& d;
  const int64_t* target;
  const T* diff_dst;
  T scalar;
  GradScale(const ClassLossDesc& desc, const int64_t* t, const T* dy) : d(desc), target(t), diff_dst(dy), scalar(0) {
    if (d.reduction == Reduction::sum) scalar = dy[0];
    if (d.reduction == Reduction::mean) scalar = T(double(dy[0]) / double(count_targets(d, t)));
  }
  T operator()(int64_t i) const {
    if (target[i] == d.ignore_index) return T(0);
    return d.reduction == Reduction::none ? diff_dst[i] : scalar;
  }
};

template <class T>
void ce_fwd_rows(const ClassLossDesc& d, const T* src, const int64_t* target, std::vector<double>& loss,
                 T* save_lse) {
  const int64_t C = d.C;
  const double eps = d.label_smoothing;
  parallel_for(0, d.N, std::max<int64_t>(1, 16384 / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* x = src + n * C;
      T mx = x[0];
#pragma omp simd reduction(max : mx)
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, x[c]);
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[c] - mx);
      const T lse = mx + std::log(sum);
      save_lse[n] = lse;
      const int64_t t = target[n];
      if (t == d.ignore_index) {
        loss[size_t(n)] = 0;
        continue;
      }
      double l = double(lse) - (1 - eps) * double(x[t]);
      if (eps > 0) {
        double sx = 0;
#pragma omp simd reduction(+ : sx)
        for (int64_t c = 0; c < C; ++c) sx += double(x[c]);
        l -= eps / double(C) * sx;
      }
      loss[size_t(n)] = l;
    }
  });
}

template <class T>
void ce_fwd_blocked(const ClassLossDesc& d, const T* src, const int64_t* target, std::vector<double>& loss,
                    T* save_lse) {
  const int64_t C = d.C, S = d.S;
  const double eps = d.label_smoothing;
  const int64_t nblk = (S + kInnerBlock - 1) / kInnerBlock;
  parallel_for(0, d.N * nblk, 1, [&](int64_t tb, int64_t te) {
    T mx[kInnerBlock], sum[kInnerBlock];
    double sx[kInnerBlock];
    for (int64_t task = tb; task < te; ++task) {
      const int64_t n = task / nblk, s0 = (task % nblk) * kInnerBlock, w = std::min(kInnerBlock, S - s0);
      const T* x = src + n * C * S + s0;
      for (int64_t j = 0; j < w; ++j) { mx[j] = x[j]; sum[j] = 0; sx[j] = 0; }
      for (int64_t c = 1; c < C; ++c) {
        const T* row = x + c * S;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) mx[j] = std::max(mx[j], row[j]);
      }
      for (int64_t c = 0; c < C; ++c) {
        const T* row = x + c * S;
        for (int64_t j = 0; j < w; ++j) sum[j] += std::exp(row[j] - mx[j]);
        if (eps > 0) {
#pragma omp simd
          for (int64_t j = 0; j < w; ++j) sx[j] += double(row[j]);
        }
      }
      for (int64_t j = 0; j < w; ++j) {
        const int64_t i = n * S + s0 + j;
        const T lse = mx[j] + std::log(sum[j]);
        save_lse[i] = lse;
        const int64_t t = target[i];
        loss[size_t(i)] = t == d.ignore_index
                              ? 0.0
                              : double(lse) - (1 - eps) * double(x[t * S + j]) - eps / double(C) * sx[j];
      }
    }
  });
}

template <class T>
void ce_bwd_rows(const ClassLossDesc& d, const T* src, const int64_t* target, const T* lse, const T* dy, T* dx) {
  const int64_t C = d.C;
  const GradScale<T> gs(d, target, dy);
  const T eps = T(d.label_smoothing), smooth = T(d.label_smoothing / double(C));
  parallel_for(0, d.N, std::max<int64_t>(1, 16384 / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* x = src + n * C;
      T* o = dx + n * C;
      const T g = gs(n), l = lse[n];
      if (g == T(0)) {
        std::memset(static_cast<void*>(o), 0, sizeof(T) * size_t(C));
        continue;
      }
      for (int64_t c = 0; c < C; ++c) o[c] = g * (std::exp(x[c] - l) - smooth);
      o[target[n]] -= g * (T(1) - eps);
    }
  });
}

template <class T>
void ce_bwd_blocked(const ClassLossDesc& d, const T* src, const int64_t* target, const T* lse, const T* dy, T* dx) {
  const int64_t C = d.C, S = d.S;
  const GradScale<T> gs(d, target, dy);
  const T eps = T(d.label_smoothing), smooth = T(d.label_smoothing / double(C));
  const int64_t nblk = (S + kInnerBlock - 1) / kInnerBlock;
  parallel_for(0, d.N * nblk, 1, [&](int64_t tb, int64_t te) {
    T g[kInnerBlock];
    for (int64_t task = tb; task < te; ++task) {
      const int64_t n = task / nblk, s0 = (task % nblk) * kInnerBlock, w = std::min(kInnerBlock, S - s0);
      const T* x = src + n * C * S + s0;
      const T* l = lse + n * S + s0;
      T* o = dx + n * C * S + s0;
      for (int64_t j = 0; j < w; ++j) g[j] = gs(n * S + s0 + j);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < w; ++j) o[c * S + j] = g[j] * (std::exp(x[c * S + j] - l[j]) - smooth);
      for (int64_t j = 0; j < w; ++j) {
        const int64_t t = target[n * S + s0 + j];
        if (t != d.ignore_index) o[t * S + j] -= g[j] * (T(1) - eps);
      }
    }
  });
}

template <class T>
void nll_fwd_t(const ClassLossDesc& d, const T* src, const int64_t* target, T* dst) {
  const int64_t m = d.N * d.S;
  std::vector<double> loss(static_cast<size_t>(m));
  parallel_for(0, m, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = i / d.S, s = i % d.S, t = target[i];
      loss[size_t(i)] = t == d.ignore_index ? 0.0 : -double(src[(n * d.C + t) * d.S + s]);
    }
  });
  finish_class(d, loss, count_targets(d, target), dst);
}

template <class T>
void nll_bwd_t(const ClassLossDesc& d, const int64_t* target, const T* dy, T* dx) {
  const GradScale<T> gs(d, target, dy);
  const int64_t per_n = d.C * d.S;
  parallel_for(0, d.N, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, per_n)), [&](int64_t b, int64_t e) {
    std::memset(static_cast<void*>(dx + b * per_n), 0, sizeof(T) * size_t((e - b) * per_n));
    for (int64_t n = b; n < e; ++n)
      for (int64_t s = 0; s < d.S; ++s) {
        const int64_t i = n * d.S + s, t = target[i];
        if (t != d.ignore_index) dx[(n * d.C + t) * d.S + s] = -gs(i);
      }
  });
}

// ---------------------------------------------------------------- elementwise losses
template <class T>
inline T softplus_neg(T x) {  // log(1 + exp(-x)) for either sign of x
  return std::log1p(std::exp(-std::abs(x))) + std::max(-x, T(0));
}

template <class T, class F>
void point_reduce(const PointLossDesc& d, T* dst, const F& loss_at) {
  if (d.reduction == Reduction::none) {
    parallel_for(0, d.n, 8192, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = loss_at(i);
    });
    return;
  }
  const int64_t nblk = (d.n + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> part(size_t(nblk), 0.0);
  parallel_for(0, nblk, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t b = blk * kReduceBlock, e = std::min(d.n, b + kReduceBlock);
      double acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = b; i < e; ++i) acc += double(loss_at(i));
      part[size_t(blk)] = acc;
    }
  });
  double acc = 0;
  for (double v : part) acc += v;
  dst[0] = T(d.reduction == Reduction::sum ? acc : acc / double(d.n));
}

template <class T>
void point_fwd_t(const PointLossDesc& d, const T* x, const T* t, const T* pw, T* dst) {
  if (d.kind == PointLoss::mse) {
    point_reduce(d, dst, [&](int64_t i) { return (x[i] - t[i]) * (x[i] - t[i]); });
  } else if (pw) {
    point_reduce(d, dst, [&](int64_t i) {
      return (T(1) - t[i]) * x[i] + (T(1) + (pw[i] - T(1)) * t[i]) * softplus_neg(x[i]);
    });
  } else {
    point_reduce(d, dst, [&](int64_t i) { return (T(1) - t[i]) * x[i] + softplus_neg(x[i]); });
  }
}

template <class T>
void point_bwd_t(const PointLossDesc& d, const T* x, const T* t, const T* pw, const T* dy, T* dx, T* dt) {
  const bool none = d.reduction == Reduction::none;
  const T scalar = none ? T(0) : d.reduction == Reduction::sum ? dy[0] : T(double(dy[0]) / double(d.n));
  parallel_for(0, d.n, 8192, [&](int64_t b, int64_t e) {
    if (d.kind == PointLoss::mse) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) {
        const T g = none ? dy[i] : scalar;
        const T v = T(2) * (x[i] - t[i]) * g;
        if (dx) dx[i] = v;
        if (dt) dt[i] = -v;
      }
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      const T g = none ? dy[i] : scalar;
      const T p = pw ? pw[i] : T(1);
      const T lw = T(1) + (p - T(1)) * t[i];
      if (dx) dx[i] = g * ((T(1) - t[i]) - lw / (T(1) + std::exp(x[i])));  // lw * sigmoid(-x)
      if (dt) dt[i] = g * (-x[i] + (p - T(1)) * softplus_neg(x[i]));
    }
  });
}

bool float_or_double(DType t) { return t == DType::float32 || t == DType::float64; }


}  // namespace

bool supports_class_loss(const ClassLossDesc& d) { return float_or_double(d.dtype) && d.C > 0; }

void cross_entropy_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst, void* save_lse) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> loss(size_t(d.N * d.S));
    auto fn = d.S == 1 ? ce_fwd_rows<T> : ce_fwd_blocked<T>;
    fn(d, static_cast<const T*>(src), target, loss, static_cast<T*>(save_lse));
    finish_class(d, loss, count_targets(d, target), static_cast<T*>(dst));
  });
}

void cross_entropy_bwd(const ClassLossDesc& d, const void* src, const int64_t* target, const void* save_lse,
                       const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto fn = d.S == 1 ? ce_bwd_rows<T> : ce_bwd_blocked<T>;
    fn(d, static_cast<const T*>(src), target, static_cast<const T*>(save_lse), static_cast<const T*>(diff_dst),
       static_cast<T*>(diff_src));
  });
}

void nll_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    nll_fwd_t(d, static_cast<const T*>(src), target, static_cast<T*>(dst));
  });
}

void nll_bwd(const ClassLossDesc& d, const int64_t* target, const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    nll_bwd_t(d, target, static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

bool supports_point_loss(const PointLossDesc& d) { return float_or_double(d.dtype); }

void point_loss_fwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight, void* dst) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    point_fwd_t(d, static_cast<const T*>(src), static_cast<const T*>(target), static_cast<const T*>(pos_weight),
                static_cast<T*>(dst));
  });
}

void point_loss_bwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight,
                    const void* diff_dst, void* diff_src, void* diff_target) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    point_bwd_t(d, static_cast<const T*>(src), static_cast<const T*>(target), static_cast<const T*>(pos_weight),
                static_cast<const T*>(diff_dst), static_cast<T*>(diff_src), static_cast<T*>(diff_target));
  });
}

}  // namespace kiln::native
