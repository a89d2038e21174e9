// cuDNN batch norm (spatial mode; training and inference forward, training backward; the fused
// ReLU of BatchNormDesc.relu applied in place after) and softmax / log-softmax over the middle axis
// of [outer, dim, inner]. float32, contiguous NCHW or channels-last ([N, S, C]) batch norm.
// kiln's contract is kept exactly: save_invstd = 1/sqrt(biased batch var + eps) (cuDNN's saved
// inverse variance is that), running_var updated with the unbiased batch variance (what cuDNN's
// exponentialAverageFactor update does, PyTorch relies on it too), eval mode fills save_mean and
// save_invstd from the running statistics. Device pointers, current stream, no synchronisation;
// signatures of kiln::native's.
//   ctest -L gpu -R cudnn (tests/gpu/test_cudnn.cpp)
#pragma once

#include "kernels/common/norm.h"

namespace kiln::cudnn {

bool supports_batch_norm_fwd(const BatchNormDesc& d);
bool supports_batch_norm_bwd(const BatchNormDesc& d);  // training mode only
void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd);
void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias);

bool supports_softmax(const SoftmaxDesc& d);
void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst);
void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src);

}  // namespace kiln::cudnn
