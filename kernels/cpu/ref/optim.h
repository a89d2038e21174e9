// Reference kernels of the optimizer family, templated on T and written one element at a time
// from the formulas in kernels/common/optim.h, in the order torch.optim's tensor ops round them
// (each torch op rounds to T; scalars are rounded to T first). The tests run them in double as the
// oracle for kernels/cpu/native/optim.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/optim.h"

namespace kiln::ref {

template <class T>
void sgd_step(const SGDStepDesc& d, T* p, const T* g, T* buf) {
  const T wd = T(d.weight_decay), m = T(d.momentum), keep = T(1 - d.dampening), alpha = T(-d.lr);
  for (int64_t i = 0; i < d.n; ++i) {
    T dp = g[i];
    if (d.weight_decay != 0) dp = dp + wd * p[i];
    if (d.momentum != 0) {
      buf[i] = d.first ? dp : T(buf[i] * m) + keep * dp;
      dp = d.nesterov ? dp + m * buf[i] : buf[i];
    }
    p[i] = p[i] + alpha * dp;
  }
}

// The double scalars Adam derives from the step (as torch.optim computes them in Python).
struct AdamScalars {
  double step_size, bc2_sqrt;
  explicit AdamScalars(const AdamStepDesc& d)
      : step_size(d.lr / (1 - std::pow(d.beta1, double(d.step)))),
        bc2_sqrt(std::sqrt(1 - std::pow(d.beta2, double(d.step)))) {}
};

template <class T>
void adam_step(const AdamStepDesc& d, T* p, const T* g, T* m, T* v) {
  const AdamScalars s(d);
  const T decay = T(1 - d.lr * d.weight_decay), wd = T(d.weight_decay);
  const T b1 = T(d.beta1), b2 = T(d.beta2), c1 = T(1 - d.beta1), c2 = T(1 - d.beta2);
  const T eps = T(d.eps), bc2 = T(s.bc2_sqrt), neg_step = T(-s.step_size);
  for (int64_t i = 0; i < d.n; ++i) {
    T gi = g[i];
    if (d.decoupled && d.weight_decay != 0) p[i] = p[i] * decay;
    if (!d.decoupled && d.weight_decay != 0) gi = gi + wd * p[i];
    m[i] = T(m[i] * b1) + c1 * gi;
    v[i] = T(v[i] * b2) + T(c2 * gi) * gi;
    const T denom = T(std::sqrt(v[i]) / bc2) + eps;
    p[i] = p[i] + T(neg_step * m[i]) / denom;
  }
}

template <class T>
void lars_step(const LarsStepDesc& d, T* p, const T* g, T* buf) {
  const T wd = T(d.weight_decay), m = T(d.momentum), rate = T(d.lr * d.local_lr);
  for (int64_t i = 0; i < d.n; ++i) {
    const T u = d.weight_decay != 0 ? g[i] + wd * p[i] : g[i];
    buf[i] = T(buf[i] * m) + rate * u;
    p[i] = p[i] - buf[i];
  }
}

template <class T>
void sum_squares(const VecDesc& d, const T* x, double* out) {
  double acc = 0;
  for (int64_t i = 0; i < d.n; ++i) acc += double(x[i]) * double(x[i]);
  *out = acc;
}

template <class T>
void scale(const VecDesc& d, T* x) {
  const T s = T(d.scale);
  for (int64_t i = 0; i < d.n; ++i) x[i] = x[i] * s;
}

}  // namespace kiln::ref
