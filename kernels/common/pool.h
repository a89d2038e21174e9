// Pooling and local response normalisation descriptors (NCHW, contiguous planes), plus the
// index rules shared by every implementation: PyTorch's output-size rule for (ceil-mode) pooling
// and its start/end formula for adaptive pooling, written once so ref, native and the CUDA
// kernels agree to the element.
//   tests: ctest --test-dir build -R pool
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

#include "kernels/common/host_device.h"

namespace kiln {

enum class PoolAlg : uint8_t { max, avg };

// Window pooling over [n*c planes, ih, iw] -> [n*c, oh, ow].
// max: out-of-image taps count as -inf; the index written per output is the flat position
//      h * iw + w inside the plane (PyTorch's convention), -1 if the window held no image pixel;
//      the index pointer may be null when only values are wanted (inference).
// avg: the divisor is divisor_override if > 0, else the window clipped to the padded image when
//      count_include_pad, else the window clipped to the image (PyTorch's rules).
struct PoolDesc {
  PoolAlg alg = PoolAlg::max;
  DType dtype = DType::float32;
  int64_t n = 1, c = 1;
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil_mode = false;  // informational (oh/ow already include it)
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // 0: none
  bool nhwc = false;  // src/dst channels-last: [n, h, w, c] in memory (indices still h * iw + w)
  KILN_HOST_DEVICE int64_t planes() const { return n * c; }
  // Offset of element (h, w) of plane p = image * c + channel in an [n, c, hh, ww] array.
  KILN_HOST_DEVICE int64_t at(int64_t p, int64_t h, int64_t w, int64_t hh, int64_t ww) const {
    return nhwc ? (((p / c) * hh + h) * ww + w) * c + p % c : (p * hh + h) * ww + w;
  }
  std::string str() const;
};

// PyTorch's pooling_output_shape: floor or ceil of the window count; in ceil mode a last window
// that would start inside the right/bottom padding (or beyond) is dropped.
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode);

// Adaptive pooling: output o of `out` covers input [start, end) of `in`.
struct AdaptivePoolDesc {
  PoolAlg alg = PoolAlg::avg;
  DType dtype = DType::float32;
  int64_t n = 1, c = 1;
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t planes() const { return n * c; }
  std::string str() const;
};

KILN_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
KILN_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t out, int64_t in) {
  return ((o + 1) * in + out - 1) / out;
}

// Local response normalisation across channels of [n, c, inner]:
//   scale[i] = k + alpha / size * sum_{j = i - size/2}^{i + (size-1)/2} src[j]^2 (zero outside),
//   dst[i] = src[i] * scale[i]^-beta.
// Forward also writes `scale` (same shape as src) for backward.
struct LrnDesc {
  DType dtype = DType::float32;
  int64_t n = 1, c = 1, inner = 1;
  int64_t size = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  std::string str() const;
};

}  // namespace kiln
