// kiln's own CUDA pooling and LRN kernels: max/avg window pooling (NCHW and NHWC, PyTorch's
// index contract, ceil mode, dilation, count_include_pad, divisor_override), adaptive pooling,
// LRN across channels; forward and backward. Every backward is a GATHER (a thread per input
// element sums, in the reference's order, the outputs whose windows cover it), so it is
// deterministic with no atomics. float32, float64, bfloat16 and float16 (16-bit data summed in
// float32); same descriptors and signatures as kernels/cpu/native/pool.h, DEVICE pointers,
// launched on current_stream().
// Test (emulated): ctest --test-dir build -R emu   (tests/emu/test_pool.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/pool.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_pool(const PoolDesc& d);
void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index);
void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_adaptive_pool(const AdaptivePoolDesc& d);
void adaptive_pool_fwd(const AdaptivePoolDesc& d, const void* src, void* dst, int64_t* index);
void adaptive_pool_bwd(const AdaptivePoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_lrn(const LrnDesc& d);
void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale);
void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src);

KILN_CUDA_NAMESPACE_END
