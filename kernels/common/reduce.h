// Reductions over the middle axis of a contiguous [outer, reduce, inner] array:
// dst[o, i] = op over r of src[o, r, i]; argmax/argmin/max/min also write int64 indices.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

enum class ReduceOp : uint8_t { sum, mean, max, min };

struct ReduceDesc {
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::float32;
  int64_t outer = 1, reduce = 1, inner = 1;
  bool want_index = false;  // max/min: also write the index of the chosen element (first on ties)
  std::string str() const;
};

// Backward of max/min along the axis: dst[o, idx[o,i], i] = src[o, i], zero elsewhere.
struct IndexScatterDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, reduce = 1, inner = 1;
  std::string str() const;
};

}  // namespace kiln
