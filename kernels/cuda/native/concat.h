// kiln's own CUDA kernels of the two n-ary ops (kernels/common/concat.h): concat, one
// row-strided block copy per input, and sum, the inputs added in order (x0 + x1 + ... as the CPU
// kernels do, so the bits agree). Same descriptors and signatures as kernels/cpu/native/concat.h:
// `srcs` is a host array of DEVICE pointers; launched on current_stream(), never synchronising.
// Test (emulated): ctest --test-dir build -R emu.test_concat
#pragma once

#include "kernels/common/concat.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_concat(const ConcatDesc& d);
void concat(const ConcatDesc& d, const void* const* srcs, void* dst);
bool supports_sum(const SumDesc& d);
void sum(const SumDesc& d, const void* const* srcs, void* dst);

KILN_CUDA_NAMESPACE_END
