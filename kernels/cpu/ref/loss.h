// Reference kernels of the loss family, templated on T and written from the definitions
// (log-softmax, then the smoothed NLL; the BCE and MSE formulas); the tests run them in double
// as the oracle for kernels/cpu/native/loss.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/loss.h"

namespace kiln::ref {

// Writes per-element losses `loss` (count of them = n) reduced as d.reduction into dst.
template <class T>
void reduce_losses(Reduction r, const T* loss, int64_t n, int64_t count, T* dst) {
  if (r == Reduction::none) {
    for (int64_t i = 0; i < n; ++i) dst[i] = loss[i];
    return;
  }
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += loss[i];
  dst[0] = r == Reduction::sum ? acc : acc / T(count);
}

inline int64_t count_targets(const ClassLossDesc& d, const int64_t* target) {
  int64_t count = 0;
  for (int64_t i = 0; i < d.N * d.S; ++i) count += target[i] != d.ignore_index;
  return count;
}

template <class T>
T class_loss_grad_scale(const ClassLossDesc& d, const T* diff_dst, int64_t i, int64_t count) {
  if (d.reduction == Reduction::none) return diff_dst[i];
  return d.reduction == Reduction::sum ? diff_dst[0] : diff_dst[0] / T(count);
}

template <class T>
void cross_entropy_fwd(const ClassLossDesc& d, const T* src, const int64_t* target, T* dst, T* save_lse) {
  const int64_t m = d.N * d.S;
  std::vector<T> loss(static_cast<size_t>(m));
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t i = n * d.S + s;
      auto x = [&](int64_t c) { return src[(n * d.C + c) * d.S + s]; };
      T mx = x(0);
      for (int64_t c = 1; c < d.C; ++c) mx = x(c) > mx ? x(c) : mx;
      T sum = 0;
      for (int64_t c = 0; c < d.C; ++c) sum += std::exp(x(c) - mx);
      const T lse = mx + std::log(sum);
      save_lse[i] = lse;
      const int64_t t = target[i];
      if (t == d.ignore_index) {
        loss[i] = 0;
        continue;
      }
      T sum_logp = 0;
      for (int64_t c = 0; c < d.C; ++c) sum_logp += x(c) - lse;
      const T eps = T(d.label_smoothing);
      loss[i] = -(T(1) - eps) * (x(t) - lse) - eps / T(d.C) * sum_logp;
    }
  reduce_losses(d.reduction, loss.data(), m, count_targets(d, target), dst);
}

template <class T>
void cross_entropy_bwd(const ClassLossDesc& d, const T* src, const int64_t* target, const T* save_lse,
                       const T* diff_dst, T* diff_src) {
  const int64_t count = count_targets(d, target);
  const T eps = T(d.label_smoothing);
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t i = n * d.S + s;
      const int64_t t = target[i];
      const T g = t == d.ignore_index ? T(0) : class_loss_grad_scale(d, diff_dst, i, count);
      for (int64_t c = 0; c < d.C; ++c) {
        const int64_t j = (n * d.C + c) * d.S + s;
        const T p = std::exp(src[j] - save_lse[i]);
        diff_src[j] = g * (p - (c == t ? T(1) - eps : T(0)) - eps / T(d.C));
      }
    }
}

template <class T>
void nll_fwd(const ClassLossDesc& d, const T* src, const int64_t* target, T* dst) {
  const int64_t m = d.N * d.S;
  std::vector<T> loss(static_cast<size_t>(m));
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t i = n * d.S + s, t = target[i];
      loss[i] = t == d.ignore_index ? T(0) : -src[(n * d.C + t) * d.S + s];
    }
  reduce_losses(d.reduction, loss.data(), m, count_targets(d, target), dst);
}

template <class T>
void nll_bwd(const ClassLossDesc& d, const int64_t* target, const T* diff_dst, T* diff_src) {
  const int64_t count = count_targets(d, target);
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t i = n * d.S + s, t = target[i];
      for (int64_t c = 0; c < d.C; ++c) {
        const bool hit = t != d.ignore_index && c == t;
        diff_src[(n * d.C + c) * d.S + s] = hit ? -class_loss_grad_scale(d, diff_dst, i, count) : T(0);
      }
    }
}

template <class T>
T softplus_neg(T x) {  // log(1 + exp(-x)), stable for either sign
  return std::log1p(std::exp(-std::abs(x))) + (x < T(0) ? -x : T(0));
}

template <class T>
void point_loss_fwd(const PointLossDesc& d, const T* src, const T* target, const T* pos_weight, T* dst) {
  std::vector<T> loss(static_cast<size_t>(d.n));
  for (int64_t i = 0; i < d.n; ++i) {
    const T x = src[i], t = target[i];
    if (d.kind == PointLoss::mse) {
      loss[i] = (x - t) * (x - t);
    } else {
      const T lw = pos_weight ? T(1) + (pos_weight[i] - T(1)) * t : T(1);
      loss[i] = (T(1) - t) * x + lw * softplus_neg(x);
    }
  }
  reduce_losses(d.reduction, loss.data(), d.n, d.n, dst);
}

template <class T>
void point_loss_bwd(const PointLossDesc& d, const T* src, const T* target, const T* pos_weight, const T* diff_dst,
                    T* diff_src, T* diff_target) {
  for (int64_t i = 0; i < d.n; ++i) {
    const T g = d.reduction == Reduction::none ? diff_dst[i]
                : d.reduction == Reduction::sum ? diff_dst[0]
                                                : diff_dst[0] / T(d.n);
    const T x = src[i], t = target[i];
    if (d.kind == PointLoss::mse) {
      if (diff_src) diff_src[i] = T(2) * (x - t) * g;
      if (diff_target) diff_target[i] = -T(2) * (x - t) * g;
    } else {
      const T pw = pos_weight ? pos_weight[i] : T(1);
      const T lw = T(1) + (pw - T(1)) * t;
      const T sig_neg = T(1) / (T(1) + std::exp(x));  // sigmoid(-x)
      if (diff_src) diff_src[i] = g * ((T(1) - t) - lw * sig_neg);
      if (diff_target) diff_target[i] = g * (-x + (pw - T(1)) * softplus_neg(x));
    }
  }
}

}  // namespace kiln::ref
