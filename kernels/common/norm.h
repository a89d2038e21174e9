// Descriptors of the normalisation family: batch norm, dropout, softmax / log-softmax.
// Every kernel reads and writes contiguous arrays; the op wrappers in engine/ops/norm.cpp make
// inputs contiguous and fill these. Test: ctest --test-dir build -R norm
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

// Batch norm over a contiguous [N, C, S] array (S = product of the spatial dims, 1 for [N, C]).
// Forward (src, wei, bias, running_mean, running_var -> dst, save_mean, save_invstd):
//  training: per-channel batch mean and biased variance normalise; save_* receive them (invstd =
//    1/sqrt(var + eps)); running_* (if not null) become (1 - momentum) * old + momentum * batch,
//    with the UNBIASED batch variance for running_var, as PyTorch does.
//  eval: running_* (read only) normalise; save_* receive running_mean and its invstd.
// wei / bias may be null (affine=false: scale 1, shift 0).
// Backward (src, diff_dst, wei, save_mean, save_invstd -> diff_src, diff_wei, diff_bias), each
// output nullable; training differentiates through the batch statistics, eval does not.
// With nhwc the array is [N, S, C] (channels-last: a 4-d input's NHWC memory), else [N, C, S].
// dtype bfloat16: src, dst and their gradients are bfloat16; weights, biases, running and saved
// statistics and their gradients float32.
struct BatchNormDesc {
  DType dtype = DType::float32;
  int64_t N = 1, C = 1, S = 1;
  bool nhwc = false;
  bool relu = false;  // forward only: dst = max(batch norm, 0), the ReLU fused into the output pass
  int64_t at(int64_t n, int64_t c, int64_t s) const { return nhwc ? (n * S + s) * C + c : (n * C + c) * S + s; }
  bool training = true;
  double eps = 1e-5;
  double momentum = 0.1;
  std::string str() const;
};

// Inverted dropout of n contiguous elements: element i is kept when
// philox_uniform(seed, offset, i) >= p, and then scaled by 1/(1-p); mask[i] = 1 if kept, else 0.
// The draw depends only on (seed, offset, i), never on the thread count.
struct DropoutDesc {
  DType dtype = DType::float32;
  int64_t n = 0;
  double p = 0.5;
  uint64_t seed = 0, offset = 0;
  double scale() const { return p < 1 ? 1.0 / (1.0 - p) : 0.0; }
  std::string str() const;
};

// Softmax / log-softmax along the middle axis of a contiguous [outer, dim, inner] array.
// Backward takes the forward OUTPUT y: softmax dx = y * (dy - sum(dy * y)),
// log-softmax dx = dy - exp(y) * sum(dy).
struct SoftmaxDesc {
  DType dtype = DType::float32;
  int64_t outer = 1, dim = 1, inner = 1;
  bool log = false;
  std::string str() const;
};

}  // namespace kiln
