// cuDNN convolution behind kiln's ConvDesc: forward (bias and the fused ReLU of ConvDesc.relu),
// backward-data, backward-weights (+ bias). NCHW or NHWC activations, KCRS weights, groups,
// stride, dilation, symmetric padding; float32 (no TF32 unless allowed), float16/bfloat16 with
// float32 compute on tensor cores. Algorithms by heuristics, or timed once per shape with
// KILN_CUDNN_BENCHMARK=1 / cudnn::set_benchmark; cached per (descriptor, device); workspace within
// KILN_CUDNN_WORKSPACE_MB. Device pointers, current stream, no synchronisation. Same signatures as
// kiln::native's conv entry points.
//   ctest -L gpu -R cudnn (tests/gpu/test_cudnn.cpp); mapping: ctest -R cudnn_mapping
#pragma once

#include "kernels/common/conv.h"

namespace kiln::cudnn {

// What cuDNN can express for this device (no cuDNN call).
bool supports_conv(const ConvDesc& d);
// supports_conv and cuDNN's heuristics list an algorithm for the direction (asked once per shape;
// needs the device). These are what the dispatcher registers.
bool supports_conv_fwd(const ConvDesc& d);
bool supports_conv_bwd_data(const ConvDesc& d);
bool supports_conv_bwd_weights(const ConvDesc& d);
void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted).
void conv2d_bwd_weights(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei, void* diff_bias);

// Forgets every cached plan and algorithm choice (tests; after changing TF32 or benchmark mode
// the cache keys differ anyway).
void clear_conv_cache();

}  // namespace kiln::cudnn
