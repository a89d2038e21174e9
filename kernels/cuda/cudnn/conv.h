// cuDNN convolution behind kiln's ConvDesc: forward (bias and the fused ReLU of ConvDesc.relu),
// backward-data, backward-weights (+ bias). NCHW or NHWC activations, KCRS weights, groups,
// stride, dilation, symmetric padding; float32 (no TF32 unless allowed), float16/bfloat16 with
// float32 compute on tensor cores and a float32 bias (converted in workspace; mapping.h's
// ConvTypes). Algorithms by heuristics, or timed once per shape with KILN_CUDNN_BENCHMARK=1 /
// cudnn::set_benchmark; cached per (descriptor, device); workspace within KILN_CUDNN_WORKSPACE_MB.
// Device pointers, current stream, no synchronisation. Same signatures as kiln::native's conv
// entry points.
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

// What a direction of this descriptor last ran on the current device (tests, reports):
// direction 0 forward, 1 backward-data, 2 backward-weights. algo is cuDNN's algorithm number and
// math its cudnnMathType_t as the heuristics or timing reported it (mapping.h: math_type_name),
// -1 before the direction ran; descriptor_math is the math type the convolution descriptor
// requests (tensor ops for half data). fused: the forward bias+ReLU ran as one cuDNN call;
// bias_grad_cudnn: cuDNN sums the bias gradient (float32 accumulation into the float32 gradient);
// false once cuDNN refused it for this shape and data type, which kiln's own CUDA reduction then
// sums (float32 accumulation too).
struct ConvAlgoUsed {
  int algo = -1, math = -1, descriptor_math = -1;
  bool fused = false, bias_grad_cudnn = false;
};
ConvAlgoUsed conv_algo_used(const ConvDesc& d, int direction);

// Forgets every cached plan and algorithm choice (tests; after changing TF32 or benchmark mode
// the cache keys differ anyway).
void clear_conv_cache();

}  // namespace kiln::cudnn
