// kiln's own CUDA strided copy (with dtype conversion), fill, Philox random fills and the
// index scatter of max/min backward. Same descriptors and signatures as kernels/cpu/native
// (elementwise.h, reduce.h); pointers are DEVICE pointers; work is queued on
// kiln::cuda::current_stream(). random() draws element i of the loop's linear order from
// Philox counter offset + i/4 (uniform, bernoulli) or offset + i/2 (normal), exactly as the CPU
// kernels do: uniform and bernoulli give the same bits as the CPU for the same seed; normal
// uses the device's logf/sinf/cosf, which may differ from the host libm in the last bit.
//   emu test: ctest --test-dir build -R test_copy -L emu
#pragma once

#include "kernels/common/elementwise.h"
#include "kernels/common/reduce.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

// Every dtype pair of float32, float64, float16, bfloat16, int32, int64, uint8, boolean.
bool supports_copy(const CopyDesc& d);
void copy(const CopyDesc& d, const void* src, void* dst);
bool supports_fill(const FillDesc& d);
void fill(const FillDesc& d, void* dst);
bool supports_random(const RandomDesc& d);
void random(const RandomDesc& d, void* dst);
// dst[o, r, i] = src[o, i] where index[o, i] == r, else 0 (a gather per output: deterministic).
bool supports_index_scatter(const IndexScatterDesc& d);
void index_scatter(const IndexScatterDesc& d, const void* src, const int64_t* index, void* dst);

KILN_CUDA_NAMESPACE_END
