// kiln's own CUDA reductions over the middle axis of a contiguous [outer, reduce, inner] array
// (kernels/common/reduce.h): sum and mean, float32 and float64; sum, max and min also int64 (the
// integer and boolean reductions). Deterministic: no atomics; long
// axes are reduced in two passes (fixed chunks into a scratch buffer, then the chunks), and the
// split depends only on the shape, so one shape always gives the same bits.
// Test: ctest --test-dir build -R emu.reduce (emulated); the gpu tests on a real device.
#pragma once

#include "kernels/common/reduce.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_reduce(const ReduceDesc& d);
// max and min write the index of the chosen element where `index` is given (argmax).
void reduce(const ReduceDesc& d, const void* src, void* dst, int64_t* index);

KILN_CUDA_NAMESPACE_END
