// Reference reductions, accumulating in T (run in double by the tests).
#pragma once

#include <cstring>

#include "kernels/common/reduce.h"

namespace kiln::ref {

template <class T>
void reduce(const ReduceDesc& d, const T* src, T* dst, int64_t* index) {
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      const T* s = src + o * d.reduce * d.inner + i;
      T acc = (d.op == ReduceOp::sum || d.op == ReduceOp::mean) ? T(0) : s[0];
      int64_t best = 0;
      for (int64_t r = 0; r < d.reduce; ++r) {
        T v = s[r * d.inner];
        switch (d.op) {
          case ReduceOp::sum: case ReduceOp::mean: acc += v; break;
          case ReduceOp::max:  // the first NaN wins, as in PyTorch; else the first maximum
            if (acc == acc && (v != v || v > acc)) { acc = v; best = r; }
            break;
          case ReduceOp::min:
            if (acc == acc && (v != v || v < acc)) { acc = v; best = r; }
            break;
        }
      }
      if (d.op == ReduceOp::mean) acc /= T(d.reduce);
      dst[o * d.inner + i] = acc;
      if (index) index[o * d.inner + i] = best;
    }
}

template <class T>
void index_scatter(const IndexScatterDesc& d, const T* src, const int64_t* index, T* dst) {
  std::memset(static_cast<void*>(dst), 0, sizeof(T) * size_t(d.outer * d.reduce * d.inner));
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t i = 0; i < d.inner; ++i) {
      int64_t r = index[o * d.inner + i];
      dst[(o * d.reduce + r) * d.inner + i] = src[o * d.inner + i];
    }
}

}  // namespace kiln::ref
