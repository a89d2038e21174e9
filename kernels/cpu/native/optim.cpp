// Native CPU optimizer updates. Each kernel hoists every branch on the descriptor out of the
// element loop (one specialised loop per case) so the loop body is straight-line arithmetic that
// vectorises; the arithmetic order is the reference's (kernels/cpu/ref/optim.h), so float32
// results agree with it bit for bit.
#include "kernels/cpu/native/optim.h"

#include <cmath>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/cpu/ref/optim.h"

namespace kiln::native {
namespace {

constexpr int64_t kGrain = 16384;  // elements per chunk: below this a thread is not worth waking
constexpr int64_t kReduceBlock = 4096;

bool is_float(DType t) { return t == DType::float32 || t == DType::float64; }

template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_loop(const SGDStepDesc& d, T* __restrict p, const T* __restrict g, T* __restrict buf) {
  const T wd = T(d.weight_decay), m = T(d.momentum), keep = T(1 - d.dampening), alpha = T(-d.lr);
  parallel_for(0, d.n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      T dp = g[i];
      if (kDecay) dp = dp + wd * p[i];
      if (kMomentum) {
        const T nb = kFirst ? dp : T(buf[i] * m) + keep * dp;
        buf[i] = nb;
        dp = kNesterov ? dp + m * nb : nb;
      }
      p[i] = p[i] + alpha * dp;
    }
  });
}

template <class T>
void sgd_typed(const SGDStepDesc& d, T* p, const T* g, T* buf) {
  const bool decay = d.weight_decay != 0;
  if (d.momentum == 0) {
    if (decay) sgd_loop<T, true, false, false, false>(d, p, g, buf);
    else sgd_loop<T, false, false, false, false>(d, p, g, buf);
    return;
  }
  // 8 momentum variants: (decay, first, nesterov).
  const int key = (decay ? 4 : 0) | (d.first ? 2 : 0) | (d.nesterov ? 1 : 0);
  switch (key) {
    case 0: sgd_loop<T, false, true, false, false>(d, p, g, buf); break;
    case 1: sgd_loop<T, false, true, false, true>(d, p, g, buf); break;
    case 2: sgd_loop<T, false, true, true, false>(d, p, g, buf); break;
    case 3: sgd_loop<T, false, true, true, true>(d, p, g, buf); break;
    case 4: sgd_loop<T, true, true, false, false>(d, p, g, buf); break;
    case 5: sgd_loop<T, true, true, false, true>(d, p, g, buf); break;
    case 6: sgd_loop<T, true, true, true, false>(d, p, g, buf); break;
    default: sgd_loop<T, true, true, true, true>(d, p, g, buf); break;
  }
}

template <class T, bool kL2, bool kDecoupled>
void adam_loop(const AdamStepDesc& d, T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v) {
  const ref::AdamScalars s(d);
  const T decay = T(1 - d.lr * d.weight_decay), wd = T(d.weight_decay);
  const T b1 = T(d.beta1), b2 = T(d.beta2), c1 = T(1 - d.beta1), c2 = T(1 - d.beta2);
  const T eps = T(d.eps), bc2 = T(s.bc2_sqrt), neg_step = T(-s.step_size);
  parallel_for(0, d.n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      T pi = p[i], gi = g[i];
      if (kDecoupled) pi = pi * decay;
      if (kL2) gi = gi + wd * pi;
      const T mi = T(m[i] * b1) + c1 * gi;
      const T vi = T(v[i] * b2) + T(c2 * gi) * gi;
      m[i] = mi;
      v[i] = vi;
      const T denom = T(std::sqrt(vi) / bc2) + eps;
      p[i] = pi + T(neg_step * mi) / denom;
    }
  });
}

template <class T>
void adam_typed(const AdamStepDesc& d, T* p, const T* g, T* m, T* v) {
  if (d.weight_decay == 0) adam_loop<T, false, false>(d, p, g, m, v);
  else if (d.decoupled) adam_loop<T, false, true>(d, p, g, m, v);
  else adam_loop<T, true, false>(d, p, g, m, v);
}

template <class T>
void lars_typed(const LarsStepDesc& d, T* __restrict p, const T* __restrict g, T* __restrict buf) {
  const T wd = T(d.weight_decay), m = T(d.momentum), rate = T(d.lr * d.local_lr);
  parallel_for(0, d.n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      const T u = g[i] + wd * p[i];  // wd == 0 adds an exact 0
      const T nb = T(buf[i] * m) + rate * u;
      buf[i] = nb;
      p[i] = p[i] - nb;
    }
  });
}

template <class T>
void sum_squares_typed(const VecDesc& d, const T* x, double* out) {
  const int64_t blocks = (d.n + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  parallel_for(0, blocks, 4, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t lo = k * kReduceBlock, hi = std::min(d.n, lo + kReduceBlock);
      double acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = lo; i < hi; ++i) acc += double(x[i]) * double(x[i]);
      partial[size_t(k)] = acc;
    }
  });
  double acc = 0;
  for (double v : partial) acc += v;
  *out = acc;
}

template <class T>
void scale_typed(const VecDesc& d, T* x) {
  const T s = T(d.scale);
  parallel_for(0, d.n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) x[i] = x[i] * s;
  });
}

}  // namespace

bool supports_optim_sgd(const SGDStepDesc& d) { return is_float(d.dtype); }
bool supports_optim_adam(const AdamStepDesc& d) { return is_float(d.dtype); }
bool supports_optim_lars(const LarsStepDesc& d) { return is_float(d.dtype); }
bool supports_optim_vec(const VecDesc& d) { return is_float(d.dtype); }

void sgd_step(const SGDStepDesc& d, void* param, const void* grad, void* buf) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    sgd_typed<T>(d, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(buf));
  });
}

void adam_step(const AdamStepDesc& d, void* param, const void* grad, void* exp_avg, void* exp_avg_sq) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    adam_typed<T>(d, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg),
                  static_cast<T*>(exp_avg_sq));
  });
}

void lars_step(const LarsStepDesc& d, void* param, const void* grad, void* buf) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    lars_typed<T>(d, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(buf));
  });
}

void sum_squares(const VecDesc& d, const void* x, double* out) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    sum_squares_typed<T>(d, static_cast<const T*>(x), out);
  });
}

void scale(const VecDesc& d, void* x) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    scale_typed<T>(d, static_cast<T*>(x));
  });
}

}  // namespace kiln::native
