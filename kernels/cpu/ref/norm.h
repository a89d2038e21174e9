// Reference kernels of the normalisation family (batch norm, dropout, softmax), templated on T
// and written the obvious way; the tests run them in double as the oracle for kernels/cpu/native.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/norm.h"
#include "kernels/common/philox.h"

namespace kiln::ref {

template <class T>
void batch_norm_fwd(const BatchNormDesc& d, const T* src, const T* wei, const T* bias, T* running_mean,
                    T* running_var, T* dst, T* save_mean, T* save_invstd) {
  const int64_t m = d.N * d.S;
  for (int64_t c = 0; c < d.C; ++c) {
    T mean, var;
    if (d.training) {
      T sum = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t s = 0; s < d.S; ++s) sum += src[d.at(n, c, s)];
      mean = sum / T(m);
      T sq = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t s = 0; s < d.S; ++s) {
          T v = src[d.at(n, c, s)] - mean;
          sq += v * v;
        }
      var = sq / T(m);
      if (running_mean) running_mean[c] = (T(1) - T(d.momentum)) * running_mean[c] + T(d.momentum) * mean;
      if (running_var && m > 1)
        running_var[c] = (T(1) - T(d.momentum)) * running_var[c] + T(d.momentum) * (sq / T(m - 1));
    } else {
      mean = running_mean[c];
      var = running_var[c];
    }
    const T invstd = T(1) / std::sqrt(var + T(d.eps));
    save_mean[c] = mean;
    save_invstd[c] = invstd;
    const T w = wei ? wei[c] : T(1), b = bias ? bias[c] : T(0);
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t s = 0; s < d.S; ++s) {
        const int64_t i = d.at(n, c, s);
        dst[i] = (src[i] - mean) * invstd * w + b;
        if (d.relu && !(dst[i] > T(0))) dst[i] = T(0);
      }
  }
}

template <class T>
void batch_norm_bwd(const BatchNormDesc& d, const T* src, const T* diff_dst, const T* wei, const T* save_mean,
                    const T* save_invstd, T* diff_src, T* diff_wei, T* diff_bias) {
  const int64_t m = d.N * d.S;
  for (int64_t c = 0; c < d.C; ++c) {
    T sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t s = 0; s < d.S; ++s) {
        const int64_t i = d.at(n, c, s);
        sum_dy += diff_dst[i];
        sum_dy_xhat += diff_dst[i] * (src[i] - save_mean[c]) * save_invstd[c];
      }
    if (diff_wei) diff_wei[c] = sum_dy_xhat;
    if (diff_bias) diff_bias[c] = sum_dy;
    if (!diff_src) continue;
    const T w = wei ? wei[c] : T(1);
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t s = 0; s < d.S; ++s) {
        const int64_t i = d.at(n, c, s);
        if (d.training) {
          // d/dx of w * xhat through the batch mean and variance.
          const T xhat = (src[i] - save_mean[c]) * save_invstd[c];
          diff_src[i] = w * save_invstd[c] * (diff_dst[i] - sum_dy / T(m) - xhat * sum_dy_xhat / T(m));
        } else {
          diff_src[i] = diff_dst[i] * w * save_invstd[c];
        }
      }
  }
}

template <class T>
void dropout_fwd(const DropoutDesc& d, const T* src, T* dst, uint8_t* mask) {
  const T scale = T(d.scale());
  for (int64_t i = 0; i < d.n; ++i) {
    const bool keep = double(philox_uniform(d.seed, d.offset, uint64_t(i))) >= d.p;
    mask[i] = keep ? 1 : 0;
    dst[i] = src[i] * (keep ? scale : T(0));  // x * mask * scale, as PyTorch (inf * 0 = NaN)
  }
}

template <class T>
void dropout_bwd(const DropoutDesc& d, const T* diff_dst, const uint8_t* mask, T* diff_src) {
  const T scale = T(d.scale());
  for (int64_t i = 0; i < d.n; ++i) diff_src[i] = diff_dst[i] * (mask[i] ? scale : T(0));
}

template <class T>
void softmax_fwd(const SoftmaxDesc& d, const T* src, T* dst) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      const T* x = src + o * d.dim * d.inner + i;
      T* y = dst + o * d.dim * d.inner + i;
      T mx = x[0];
      for (int64_t k = 1; k < d.dim; ++k) mx = x[k * d.inner] > mx ? x[k * d.inner] : mx;
      T sum = 0;
      for (int64_t k = 0; k < d.dim; ++k) sum += std::exp(x[k * d.inner] - mx);
      const T lse = mx + std::log(sum);
      for (int64_t k = 0; k < d.dim; ++k)
        y[k * d.inner] = d.log ? x[k * d.inner] - lse : std::exp(x[k * d.inner] - lse);
    }
}

template <class T>
void softmax_bwd(const SoftmaxDesc& d, const T* dst, const T* diff_dst, T* diff_src) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      const int64_t base = o * d.dim * d.inner + i;
      T acc = 0;
      for (int64_t k = 0; k < d.dim; ++k) {
        const int64_t j = base + k * d.inner;
        acc += d.log ? diff_dst[j] : diff_dst[j] * dst[j];
      }
      for (int64_t k = 0; k < d.dim; ++k) {
        const int64_t j = base + k * d.inner;
        diff_src[j] = d.log ? diff_dst[j] - std::exp(dst[j]) * acc : dst[j] * (diff_dst[j] - acc);
      }
    }
}

}  // namespace kiln::ref
