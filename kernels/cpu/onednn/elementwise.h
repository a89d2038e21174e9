// oneDNN eltwise behind kiln's "unary" and "binary" ops, for the activations only: relu,
// leaky_relu, sigmoid, tanh, gelu (erf form) forward, and the matching *_bwd binary ops (relu and
// leaky_relu and gelu from the input, sigmoid and tanh from the output, as kiln's BinaryOp
// contract says). Contiguous, unbroadcast float32 operands only; everything else (other ops,
// strides, broadcasting, float64) says no in supports_*() and runs on native.
// Semantics differ from kiln's only on NaN inputs (kiln's relu maps NaN to 0, oneDNN's keeps it).
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include "kernels/common/elementwise.h"

namespace kiln::onednn {

bool supports_unary(const UnaryDesc& d);
void unary(const UnaryDesc& d, const void* src, void* dst);
bool supports_binary(const BinaryDesc& d);
void binary(const BinaryDesc& d, const void* a, const void* b, void* dst);

}  // namespace kiln::onednn
