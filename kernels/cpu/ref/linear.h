// Reference inner product: naive loops accumulating in T (the tests run it in double as the
// oracle). See kernels/common/linear.h for the layouts.
//   ctest --test-dir build -R test_linear_kernels
#pragma once

#include "kernels/common/linear.h"

namespace kiln::ref {

template <class T>
void linear_fwd(const LinearDesc& d, const T* src, const T* wei, const T* bias, T* dst) {
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t o = 0; o < d.oc; ++o) {
      T acc = d.has_bias && bias ? bias[o] : T(0);
      for (int64_t c = 0; c < d.ic; ++c) acc += src[i * d.ic + c] * wei[o * d.ic + c];
      dst[i * d.oc + o] = acc;
    }
}

// diff_src = diff_dst wei
template <class T>
void linear_bwd_data(const LinearDesc& d, const T* diff_dst, const T* wei, T* diff_src) {
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t c = 0; c < d.ic; ++c) {
      T acc = T(0);
      for (int64_t o = 0; o < d.oc; ++o) acc += diff_dst[i * d.oc + o] * wei[o * d.ic + c];
      diff_src[i * d.ic + c] = acc;
    }
}

// diff_wei = diff_dst^T src, diff_bias = column sums of diff_dst; either may be null.
template <class T>
void linear_bwd_weights(const LinearDesc& d, const T* src, const T* diff_dst, T* diff_wei, T* diff_bias) {
  if (diff_wei)
    for (int64_t o = 0; o < d.oc; ++o)
      for (int64_t c = 0; c < d.ic; ++c) {
        T acc = T(0);
        for (int64_t i = 0; i < d.n; ++i) acc += diff_dst[i * d.oc + o] * src[i * d.ic + c];
        diff_wei[o * d.ic + c] = acc;
      }
  if (diff_bias)
    for (int64_t o = 0; o < d.oc; ++o) {
      T acc = T(0);
      for (int64_t i = 0; i < d.n; ++i) acc += diff_dst[i * d.oc + o];
      diff_bias[o] = acc;
    }
}

}  // namespace kiln::ref
