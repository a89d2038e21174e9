// StridedLoop: the iteration space of an elementwise op after broadcasting and coalescing (set up
// once by engine/ops/iter.cpp, the idea of ATen's TensorIterator). Operand 0 is the output.
// Dims are ordered outermost first; strides are in elements and 0 on broadcast dims.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/host_device.h"

namespace kiln {

constexpr int kMaxLoopDims = 8;
constexpr int kMaxOperands = 4;

struct StridedLoop {
  int ndim = 0;
  int noperands = 0;
  int64_t sizes[kMaxLoopDims] = {};
  int64_t strides[kMaxOperands][kMaxLoopDims] = {};

  KILN_HOST_DEVICE int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  // One dim with unit stride for every operand (or no dims at all): a plain array loop.
  KILN_HOST_DEVICE bool contiguous() const {
    if (ndim == 0) return true;
    if (ndim != 1) return false;
    for (int k = 0; k < noperands; ++k)
      if (strides[k][0] != 1) return false;
    return true;
  }
  std::string str() const;
};

// Calls f(offsets, n, inner_strides) for each run along the innermost dim within linear
// positions [begin, end): offsets[k] is operand k's element offset at the run's start.
template <class F>
void for_each_run(const StridedLoop& L, int64_t begin, int64_t end, const F& f) {
  int64_t inner_stride[kMaxOperands] = {};
  if (begin >= end) return;
  if (L.ndim == 0) {
    int64_t off[kMaxOperands] = {};
    f(off, int64_t(1), inner_stride);
    return;
  }
  const int last = L.ndim - 1;
  for (int k = 0; k < L.noperands; ++k) inner_stride[k] = L.strides[k][last];
  int64_t idx[kMaxLoopDims];
  int64_t rem = begin;
  for (int d = last; d >= 0; --d) {
    idx[d] = rem % L.sizes[d];
    rem /= L.sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t off[kMaxOperands] = {};
    for (int k = 0; k < L.noperands; ++k)
      for (int d = 0; d < L.ndim; ++d) off[k] += idx[d] * L.strides[k][d];
    int64_t n = L.sizes[last] - idx[last];
    if (n > end - pos) n = end - pos;
    f(off, n, inner_stride);
    pos += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == L.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

}  // namespace kiln
