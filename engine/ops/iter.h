// Broadcasting and loop set-up shared by every elementwise op (ATen's TensorIterator idea, small):
// computes the broadcast shape, gives broadcast dims stride 0, drops size-1 dims and merges
// adjacent dims that are contiguous in every operand, so most loops become one flat run.
#pragma once

#include <vector>

#include "engine/tensor.h"
#include "kernels/common/loop.h"

namespace kiln {

// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Loop over out's shape; each input is broadcast to it (must be broadcastable).
StridedLoop make_loop(const Tensor& out, const std::vector<const Tensor*>& inputs);

}  // namespace kiln
