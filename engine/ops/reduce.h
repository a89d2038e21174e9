// Reductions over dims, differentiable: sum, mean, max/min (values and indices), argmax/argmin.
// Dims may be negative; an empty dim list reduces over all dims.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace kiln::ops {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x);  // max over everything
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace kiln::ops
