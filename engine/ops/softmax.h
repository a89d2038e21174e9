// softmax and log_softmax, differentiable. Any strides; float32 and float64 (float16/bfloat16
// compute in float32). Test: ctest --test-dir build -R 'softmax|oracle'
#pragma once

#include "engine/tensor.h"

namespace kiln::ops {

// Softmax / log-softmax along `dim` (negative counts from the end), numerically stable (the
// maximum is subtracted before exp).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln::ops
