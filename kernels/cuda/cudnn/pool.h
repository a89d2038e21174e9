// cuDNN average pooling (forward, backward; count_include_pad on or off; NCHW or NHWC) and
// cross-channel LRN (forward, backward) behind kiln's PoolDesc / LrnDesc. float32.
// Max pooling is declined: kiln's contract writes an int64 argmax index per output (PyTorch's)
// and its backward receives only that index, while cuDNN writes no index and its backward
// recomputes the argmax from x and y; kiln's own CUDA kernels serve max pooling. LRN forward also
// writes kiln's `scale` (k + alpha/size * window sum of squares), computed with cuDNN calls
// (square, then a size x 1 convolution along channels) since cuDNN's LRN does not return it.
// Device pointers, current stream, no synchronisation; signatures of kiln::native's.
//   ctest -L gpu -R cudnn (tests/gpu/test_cudnn.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/pool.h"

namespace kiln::cudnn {

bool supports_pool(const PoolDesc& d);
void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index);
void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_lrn(const LrnDesc& d);
void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale);
void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src);

}  // namespace kiln::cudnn
