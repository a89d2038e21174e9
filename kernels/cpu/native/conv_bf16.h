// kiln's own bfloat16 convolution on channels-last activations (ConvDesc::nhwc), groups == 1:
// im2col in bfloat16 and the bfloat16 GEMM (gemm_bf16.h), products summed in float32. Operands
// as ConvDesc says for bfloat16: src, wei, dst and their gradients bfloat16, bias and diff_bias
// float32. Each result is rounded to bfloat16 once: the forward adds the bias and the residual
// (d.sum: what dst holds on entry) and applies the fused ReLU (d.relu) in float32 first; backward-data sums the overlapping taps and
// backward-weights the chunks of pixels in float32 scratch before rounding. conv.cpp's entry
// points send bfloat16 descriptors here.
//   ctest --test-dir build -R kernels.test_conv_bf16
#pragma once

#include "kernels/common/conv.h"
#include "kernels/common/half.h"

namespace kiln::native {

bool supports_conv_bf16(const ConvDesc& d);  // bfloat16, nhwc, groups == 1
void conv2d_fwd_bf16(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void conv2d_bwd_data_bf16(const ConvDesc& d, const void* diff_dst, const void* wei, void* diff_src);
// diff_wei or diff_bias may be null (not wanted).
void conv2d_bwd_weights_bf16(const ConvDesc& d, const void* src, const void* diff_dst, void* diff_wei,
                             void* diff_bias);

}  // namespace kiln::native
