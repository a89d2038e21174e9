// Indexing and selection op descriptors (engine/ops/index.cpp): gather and scatter along one
// axis of a tensor viewed as [outer, n, inner], the three-way select `where`, sorting (sort and
// topk) and the cumulative sum. Every index a kernel reads has been range-checked by the op.
#pragma once

#include <cstdint>
#include <string>

#include <type_traits>

#include "kernels/common/dtype.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/loop.h"

namespace kiln {

// dst[o, j, i] = src[o, index(o, j, i), i], src [outer, src_n, inner], dst [outer, idx_n, inner].
// per_row: index(o, j, i) = index[j] (index_select); else index[(o * idx_n + j) * inner + i]
// (gather, index shaped as dst).
struct GatherDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, src_n = 1, idx_n = 1, inner = 1;
  bool per_row = false;
  std::string str() const;
};

// dst[o, index(o, j, i), i] = src[o, j, i] (or +=, accumulate), dst [outer, dst_n, inner] updated
// in place, src [outer, idx_n, inner], index as GatherDesc's. Where indices repeat without
// accumulate, the last j wins (every kernel walks j in order).
struct ScatterDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, dst_n = 1, idx_n = 1, inner = 1;
  bool per_row = false;
  bool accumulate = false;
  std::string str() const;
};

// dst = cond ? a : b elementwise, cond boolean, broadcast by the loop (operands: dst, cond, a, b).
struct WhereDesc {
  DType dtype = DType::float32;
  StridedLoop loop;
  std::string str() const;
};

// The first k of each row of [outer, n, inner] along n, ascending or descending, with the
// positions they came from; ties keep their order (stable). sort: k = n. NaN sorts above every
// number, as in PyTorch.
struct SortDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, n = 1, inner = 1, k = 1;
  bool descending = false;
  std::string str() const;
};

// Cumulative sum along n of [outer, n, inner]; reverse: from the end (the backward of cumsum).
struct ScanDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, n = 1, inner = 1;
  bool reverse = false;
  std::string str() const;
};

// Sort order with NaN above everything (PyTorch's): a before b in ascending order.
template <class T>
KILN_HOST_DEVICE inline bool sort_less(T a, T b) {
  const bool an = a != a, bn = b != b;
  if (an || bn) return !an && bn;
  return a < b;
}

namespace fn {

// a + b as scatter_add and cumsum accumulate it: 16-bit floats through float, booleans as "or",
// integers wrapping.
template <class T>
KILN_HOST_DEVICE inline T accumulate_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return int_binary<T>(BinaryOp::add, a, b);
  else if constexpr (std::is_floating_point_v<T>) return a + b;
  else return T(float(a) + float(b));
}

// The value sorts compare: 16-bit floats as float.
template <class T>
KILN_HOST_DEVICE inline auto sort_key(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return float(v);
  else return v;
}

}  // namespace fn

}  // namespace kiln
