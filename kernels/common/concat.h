// Descriptors of the two n-ary ops: concat (cat along one dim) and sum (elementwise add of n
// tensors of one shape). Both see their operands as dense blocks in memory order:
//   concat: input i is [outer, sizes[i] * inner], the output [outer, total() * inner] with input
//           i's block at column offset (sizes[0] + ... + sizes[i-1]) * inner. NCHW cat on the
//           channels: outer = N, inner = H * W; channels-last: outer = N * H * W, inner = 1.
//   sum:    dst[j] = sum_i src_i[j] for j < n, inputs added in order (i = 0 first).
//   ctest --test-dir build -R test_concat_sum
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"

namespace kiln {

struct ConcatDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> sizes;  // per input, along the concatenated dim
  int64_t total() const;
  std::string str() const;  // "concat float32 outer16 inner784 sizes64,128,32,32"
};

struct SumDesc {
  DType dtype = DType::float32;
  int64_t n = 0;       // elements of every operand
  int64_t inputs = 0;  // >= 1
  std::string str() const;
};

}  // namespace kiln
