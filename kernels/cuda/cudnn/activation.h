// cuDNN activations behind kiln's elementwise descriptors: relu, sigmoid and tanh forward
// (UnaryDesc) and relu backward from the input (BinaryDesc relu_bwd: a = upstream gradient,
// b = x), float32 on contiguous operands; everything else is declined (kiln's own CUDA
// elementwise kernels take it). Device pointers, current stream, no synchronisation; signatures of
// kiln::native::unary / binary.
//   ctest -L gpu -R cudnn (tests/gpu/test_cudnn.cpp)
#pragma once

#include "kernels/common/elementwise.h"

namespace kiln::cudnn {

bool supports_unary(const UnaryDesc& d);
void unary(const UnaryDesc& d, const void* src, void* dst);
bool supports_binary(const BinaryDesc& d);
void binary(const BinaryDesc& d, const void* a, const void* b, void* dst);

}  // namespace kiln::cudnn
