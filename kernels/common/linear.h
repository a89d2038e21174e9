// Inner-product (fully connected) descriptor: dst[n, oc] = sum_ic src[n, ic] * wei[oc, ic] + bias[oc]
// (PyTorch's Linear, weight [out, in]; oneDNN's inner_product on 2-d nc / oi). All buffers are
// contiguous and row-major; bias is [oc] in the same dtype. The three passes (forward,
// backward-data, backward-weights + bias) share this descriptor.
//   ctest --test-dir build -R "test_linear_kernels|test_linalg_grad"
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

struct LinearDesc {
  DType dtype = DType::float32;
  int64_t n = 0;    // rows of src / dst (the flattened leading dims of the input)
  int64_t ic = 0;   // input features
  int64_t oc = 0;   // output features
  bool has_bias = false;
  std::string str() const;  // "linear float32 n64ic9216oc4096 bias"
};

}  // namespace kiln
