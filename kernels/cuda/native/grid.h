// The grid-stride launch shape kiln's one-thread-per-element CUDA kernels share (copy, shape,
// index): 256 threads a block, as many blocks as the work needs up to a cap (the loops cover the
// rest), and the offset of operand k at linear position i of a StridedLoop.
#pragma once

#include <cstdint>

#include "kernels/common/loop.h"
#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace grid {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = KILN_GRID_STRIDE_CAP(8192);

inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

KILN_DEVICE inline int64_t offset_of(const StridedLoop& L, int k, int64_t i) {
  int64_t off = 0;
  for (int d = L.ndim - 1; d >= 0; --d) {
    off += (i % L.sizes[d]) * L.strides[k][d];
    i /= L.sizes[d];
  }
  return off;
}

}  // namespace grid
KILN_CUDA_NAMESPACE_END
