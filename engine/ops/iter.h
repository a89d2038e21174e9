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

// Every op's operands live on one device: throws naming `op` and both tensors (shape, dtype,
// device) otherwise. make_loop checks it for every elementwise, copy and fill loop.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);

// Loop over out's shape; each input is broadcast to it (must be broadcastable).
StridedLoop make_loop(const Tensor& out, const std::vector<const Tensor*>& inputs);

}  // namespace kiln
