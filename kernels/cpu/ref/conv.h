// Reference 2-d convolution (the oracle): direct loops over every output and tap, accumulating in
// T (the tests run it in double). Layouts as in kernels/common/conv.h (NCHW or, with d.nhwc,
// channels-last activations); all buffers dense.
// Backward-data and backward-weights are written as the scatter/gather of the forward loop nest,
// so each is visibly the adjoint of forward.
#pragma once

#include <cstring>

#include "kernels/common/conv.h"

namespace kiln::ref {

namespace conv_detail {
// Calls f(n, k, p, q, ci, c, r, s, ih, iw) for every tap of every output that reads the input
// (taps in the padding are skipped); ci is the input channel, c the same within its group.
template <class F>
void for_each_tap(const ConvDesc& d, F&& f) {
  const int64_t Cg = d.C / d.groups, Kg = d.K / d.groups;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t k = 0; k < d.K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t p = 0; p < d.P; ++p)
        for (int64_t q = 0; q < d.Q; ++q)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < d.R; ++r) {
              const int64_t ih = p * d.stride_h - d.pad_h + r * d.dilation_h;
              if (ih < 0 || ih >= d.H) continue;
              for (int64_t s = 0; s < d.S; ++s) {
                const int64_t iw = q * d.stride_w - d.pad_w + s * d.dilation_w;
                if (iw < 0 || iw >= d.W) continue;
                f(n, k, p, q, g * Cg + c, c, r, s, ih, iw);
              }
            }
    }
}
}  // namespace conv_detail

// dst = conv(src, wei) + bias (bias may be null when !d.has_bias) [+ dst as it was, if d.sum],
// then max(dst, 0) if d.relu.
template <class T>
void conv2d_fwd(const ConvDesc& d, const T* src, const T* wei, const T* bias, T* dst) {
  const int64_t Cg = d.C / d.groups;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t k = 0; k < d.K; ++k)
      for (int64_t p = 0; p < d.P; ++p)
        for (int64_t q = 0; q < d.Q; ++q) {
          T& o = dst[d.dst_at(n, k, p, q)];
          o = (d.sum ? o : T(0)) + (d.has_bias && bias ? bias[k] : T(0));
        }
  conv_detail::for_each_tap(d, [&](int64_t n, int64_t k, int64_t p, int64_t q, int64_t ci, int64_t c, int64_t r,
                                   int64_t s, int64_t ih, int64_t iw) {
    dst[d.dst_at(n, k, p, q)] +=
        src[d.src_at(n, ci, ih, iw)] * wei[((k * Cg + c) * d.R + r) * d.S + s];
  });
  if (d.relu)
    for (int64_t i = 0; i < d.dst_elems(); ++i) dst[i] = dst[i] > T(0) ? dst[i] : T(0);
}

// diff_src = d(dst)/d(src)^T diff_dst.
template <class T>
void conv2d_bwd_data(const ConvDesc& d, const T* diff_dst, const T* wei, T* diff_src) {
  const int64_t Cg = d.C / d.groups;
  std::memset(static_cast<void*>(diff_src), 0, sizeof(T) * size_t(d.src_elems()));
  conv_detail::for_each_tap(d, [&](int64_t n, int64_t k, int64_t p, int64_t q, int64_t ci, int64_t c, int64_t r,
                                   int64_t s, int64_t ih, int64_t iw) {
    diff_src[d.src_at(n, ci, ih, iw)] +=
        diff_dst[d.dst_at(n, k, p, q)] * wei[((k * Cg + c) * d.R + r) * d.S + s];
  });
}

// diff_wei = sum over batch and positions of diff_dst x src; diff_bias = sum of diff_dst per
// channel. Either output may be null (not wanted).
template <class T>
void conv2d_bwd_weights(const ConvDesc& d, const T* src, const T* diff_dst, T* diff_wei, T* diff_bias) {
  const int64_t Cg = d.C / d.groups;
  if (diff_wei) {
    std::memset(static_cast<void*>(diff_wei), 0, sizeof(T) * size_t(d.wei_elems()));
    conv_detail::for_each_tap(d, [&](int64_t n, int64_t k, int64_t p, int64_t q, int64_t ci, int64_t c, int64_t r,
                                     int64_t s, int64_t ih, int64_t iw) {
      diff_wei[((k * Cg + c) * d.R + r) * d.S + s] +=
          diff_dst[d.dst_at(n, k, p, q)] * src[d.src_at(n, ci, ih, iw)];
    });
  }
  if (diff_bias) {
    for (int64_t k = 0; k < d.K; ++k) {
      T acc = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t p = 0; p < d.P; ++p)
          for (int64_t q = 0; q < d.Q; ++q) acc += diff_dst[d.dst_at(n, k, p, q)];
      diff_bias[k] = acc;
    }
  }
}

}  // namespace kiln::ref
