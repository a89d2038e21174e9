// Reference indexing kernels (kernels/common/index.h): plain loops in the element type, the
// oracle of the native CPU and CUDA ones. Not fast, on purpose.
#pragma once

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/common/elementwise.h"
#include "kernels/common/index.h"

namespace kiln::ref {

using fn::accumulate_add;
using fn::sort_key;

inline int64_t gather_index(const int64_t* index, bool per_row, int64_t o, int64_t j, int64_t i, int64_t idx_n,
                            int64_t inner) {
  return per_row ? index[j] : index[(o * idx_n + j) * inner + i];
}

template <class T>
void gather(const GatherDesc& d, const T* src, const int64_t* index, T* dst) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t j = 0; j < d.idx_n; ++j)
      for (int64_t i = 0; i < d.inner; ++i) {
        const int64_t r = gather_index(index, d.per_row, o, j, i, d.idx_n, d.inner);
        dst[(o * d.idx_n + j) * d.inner + i] = src[(o * d.src_n + r) * d.inner + i];
      }
}

template <class T>
void scatter(const ScatterDesc& d, const T* src, const int64_t* index, T* dst) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t j = 0; j < d.idx_n; ++j)
      for (int64_t i = 0; i < d.inner; ++i) {
        const int64_t r = gather_index(index, d.per_row, o, j, i, d.idx_n, d.inner);
        T& t = dst[(o * d.dst_n + r) * d.inner + i];
        const T v = src[(o * d.idx_n + j) * d.inner + i];
        t = d.accumulate ? accumulate_add(t, v) : v;
      }
}

template <class T>
void where(const WhereDesc& d, const bool* cond, const T* a, const T* b, T* dst) {
  for_each_run(d.loop, 0, d.loop.numel(), [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i)
      dst[off[0] + i * st[0]] = cond[off[1] + i * st[1]] ? a[off[2] + i * st[2]] : b[off[3] + i * st[3]];
  });
}

// Positions 0..n-1 of one row, ordered (stable: ties by position).
template <class T>
void sort_row(const SortDesc& d, const T* row, int64_t stride, std::vector<int64_t>& order) {
  order.resize(size_t(d.n));
  std::iota(order.begin(), order.end(), int64_t(0));
  auto key = [&](int64_t j) { return sort_key(row[j * stride]); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return d.descending ? sort_less(key(y), key(x)) : sort_less(key(x), key(y));
  });
}

template <class T>
void sort(const SortDesc& d, const T* src, T* values, int64_t* indices) {
  std::vector<int64_t> order;
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      const T* row = src + o * d.n * d.inner + i;
      sort_row(d, row, d.inner, order);
      for (int64_t r = 0; r < d.k; ++r) {
        const int64_t at = (o * d.k + r) * d.inner + i;
        values[at] = row[order[size_t(r)] * d.inner];
        indices[at] = order[size_t(r)];
      }
    }
}

template <class T>
void cumsum(const ScanDesc& d, const T* src, T* dst) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      T acc = T(0);
      for (int64_t s = 0; s < d.n; ++s) {
        const int64_t j = d.reverse ? d.n - 1 - s : s;
        const int64_t at = (o * d.n + j) * d.inner + i;
        acc = accumulate_add(acc, src[at]);
        dst[at] = acc;
      }
    }
}

}  // namespace kiln::ref
