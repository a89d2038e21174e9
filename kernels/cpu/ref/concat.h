// Reference concat and n-ary sum (kernels/common/concat.h), plain loops; the sum accumulates in
// T in input order.
//   ctest --test-dir build -R test_concat_sum
#pragma once

#include "kernels/common/concat.h"

namespace kiln::ref {

template <class T>
void concat(const ConcatDesc& d, const void* const* srcs, void* dst) {
  T* out = static_cast<T*>(dst);
  const int64_t row = d.total() * d.inner;
  int64_t col = 0;
  for (size_t i = 0; i < d.sizes.size(); ++i) {
    const T* in = static_cast<const T*>(srcs[i]);
    const int64_t w = d.sizes[i] * d.inner;
    for (int64_t o = 0; o < d.outer; ++o)
      for (int64_t j = 0; j < w; ++j) out[o * row + col + j] = in[o * w + j];
    col += w;
  }
}

template <class T>
void sum(const SumDesc& d, const void* const* srcs, void* dst) {
  T* out = static_cast<T*>(dst);
  for (int64_t j = 0; j < d.n; ++j) {
    T acc = static_cast<const T*>(srcs[0])[j];
    for (int64_t i = 1; i < d.inputs; ++i) acc += static_cast<const T*>(srcs[i])[j];
    out[j] = acc;
  }
}

}  // namespace kiln::ref
