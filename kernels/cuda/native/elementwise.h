// kiln's own CUDA elementwise kernels: unary and binary ops with broadcasting over a StridedLoop
// (kernels/common/elementwise.h), the scalar math shared with the CPU as fn::unary/fn::binary.
// float32, float64 and bfloat16 (computed in float32, rounded once per element, as on the CPU);
// int32, int64 and uint8 for the integer ops; comparisons of every dtype into booleans.
// Pointers are device pointers (host memory under the emulator); launches go on current_stream().
// Test: ctest --test-dir build -R emu.elementwise (emulated); the gpu tests on a real device.
#pragma once

#include "kernels/common/elementwise.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_unary(const UnaryDesc& d);
void unary(const UnaryDesc& d, const void* src, void* dst);
bool supports_binary(const BinaryDesc& d);
void binary(const BinaryDesc& d, const void* a, const void* b, void* dst);
void compare(const CompareDesc& d, const void* a, const void* b, void* dst);  // every dtype

KILN_CUDA_NAMESPACE_END
