// kiln's own CUDA padding and 2-d upsampling (float32, float64; contiguous planes), forward and
// backward, with the index rules of kernels/common/shape.h. Pointers are DEVICE pointers; work
// is queued on kiln::cuda::current_stream(). Backward gathers: each input element sums the
// output elements that read it, in a fixed order (no atomics, bitwise reproducible).
//   emu test: ctest --test-dir build -R test_shape -L emu
#pragma once

#include "kernels/common/shape.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_pad(const PadDesc& d);
void pad_fwd(const PadDesc& d, const void* src, void* dst);
void pad_bwd(const PadDesc& d, const void* diff_dst, void* diff_src);

bool supports_upsample(const UpsampleDesc& d);
void upsample_fwd(const UpsampleDesc& d, const void* src, void* dst);
void upsample_bwd(const UpsampleDesc& d, const void* diff_dst, void* diff_src);

KILN_CUDA_NAMESPACE_END
