// oneDNN pooling and local response normalisation on kiln's PoolDesc / LrnDesc, same signatures
// and semantics as kernels/cpu/native/pool.h (contiguous NCHW float32).
// - Average pooling, forward and backward: exclude-pad always (oneDNN divides by the taps inside
//   the image, as PyTorch); include-pad only while no window reaches past the padded image
//   (ceil mode can make one: PyTorch then divides by the clipped window, oneDNN by kh*kw);
//   never with divisor_override.
// - Max pooling stays on native: kiln's op saves int64 argmax indices (PyTorch's first maximum,
//   NaN propagating) for its backward, while oneDNN's backward needs its own workspace and its
//   forward does not promise PyTorch's tie and NaN rules. supports_pool() says no for max.
// - LRN across channels, odd sizes from 3 (oneDNN's window is (size-1)/2 either side; kiln's is
//   size/2 before and (size-1)/2 after, equal for odd sizes; size 1: see supports_lrn); both
//   divide alpha by size.
//   Forward also writes kiln's `scale` (k + alpha/size * window sum of squares), computed here
//   because oneDNN keeps its own in an opaque workspace. Backward recomputes oneDNN's workspace
//   with a forward pass when its implementation wants one.
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include <cstdint>

#include "kernels/common/pool.h"

namespace kiln::onednn {

bool supports_pool_fwd(const PoolDesc& d);
bool supports_pool_bwd(const PoolDesc& d);
// index must be null (average pooling).
void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index);
void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_lrn(const LrnDesc& d);
void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale);
void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src);

}  // namespace kiln::onednn
