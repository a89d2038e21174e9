// Pooling and local response normalisation on NCHW tensors (3-d CHW inputs are taken as a batch
// of one), differentiable, with PyTorch's semantics: output sizes (ceil mode drops a last window
// that would start in the right/bottom padding), -inf padding for max, avg divisors
// (count_include_pad, divisor_override, ceil-mode windows clipped to the padded border), adaptive
// start/end indices, and LRN's centred, zero-padded channel window. Inputs may be non-contiguous;
// float16/bfloat16 compute in float32. Pairs are {height, width}.
//   tests: ctest --test-dir build -R pool
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "engine/ops/reduce.h"  // ValuesIndices
#include "engine/tensor.h"

namespace kiln::ops {

// stride {0, 0} means "equal to kernel" (PyTorch's default). The indices (int64, same shape as the
// output) are flat positions h * W + w inside each input plane, as PyTorch returns them.
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1},
                  bool ceil_mode = false);
ValuesIndices max_pool2d_with_indices(const Tensor& x, std::array<int64_t, 2> kernel,
                                      std::array<int64_t, 2> stride = {0, 0}, std::array<int64_t, 2> padding = {0, 0},
                                      std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

// Output cell (i, j) pools input rows [floor(i*H/oh), ceil((i+1)*H/oh)) and the same for columns.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);
Tensor adaptive_max_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);
ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, std::array<int64_t, 2> output_size);

}  // namespace kiln::ops
