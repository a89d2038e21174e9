// kiln's own CUDA 2-d convolution, float32: im2col / col2im around the native CUDA GEMM
// (kernels/cuda/native/gemm.h), a chunk of images at a time through a bounded column buffer.
// Layouts and semantics as in kernels/common/conv.h (NCHW, or NHWC with d.nhwc; groups,
// stride, padding, dilation, bias, the fused ReLU of forward). Pointers are DEVICE pointers;
// the work is queued on kiln::cuda::current_stream(). Deterministic: col2im gathers the taps of
// each input pixel in a fixed order, the bias gradient is a fixed-order block reduction and the
// weight gradient accumulates image chunks one after another (no atomics anywhere).
//   emu test: ctest --test-dir build -R test_conv -L emu
#pragma once

#include "kernels/common/conv.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_conv(const ConvDesc& d);  // float32
void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted).
void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

// The bias gradient alone: diff_bias[k] (float32) = the sum over (n, p, q) of diff_dst, which has
// d.dtype (float32, float16 or bfloat16) and d.nhwc's layout; float32 accumulation in a fixed
// order. For a library that declines a half bias gradient (cuDNN's cudnnConvolutionBackwardBias
// takes no bfloat16) and for kiln's float32 bias of half convolutions.
bool supports_conv_bias_grad(const ConvDesc& d);
void conv2d_bias_grad(const ConvDesc& d, const void* diff_dst, void* diff_bias);

// The column buffer's budget in bytes (default 64 MiB; <= 0 restores it). The buffer is
// stream-ordered scratch memory (launch.h's Scratch), allocated per call. Images are processed
// in chunks that fit it (at least one image per chunk). Not thread-safe: for tests and tuning.
void set_conv_column_budget(int64_t bytes);

KILN_CUDA_NAMESPACE_END
