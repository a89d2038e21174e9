// Inverted dropout, differentiable. Any strides; float32 and float64 (float16/bfloat16 compute in
// float32). Test: ctest --test-dir build -R 'dropout|oracle'
#pragma once

#include "engine/random.h"
#include "engine/tensor.h"

namespace kiln::ops {

// Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p).
// The mask comes from the Philox stream of `gen` (default: the default generator), which
// advances by x.numel(); for a given generator state the mask does not depend on the thread
// count. Identity when !training or p == 0; zeros when p == 1; p outside [0, 1] throws.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace kiln::ops
