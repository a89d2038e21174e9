// 2-d convolution descriptor (NCHW activations, KCRS weights), shared by the ref and native
// kernels of conv2d forward, backward-data and backward-weights, and by the op layer that also
// expresses transposed convolution through them.
//   src [N, C, H, W], wei [K, C/groups, R, S], bias [K], dst [N, K, P, Q], all contiguous;
//   with nhwc, src and dst (and their gradients) are stored channels-last: element (n, c, h, w)
//   at ((n*H + h)*W + w)*C + c. Weights are KCRS either way. With dtype bfloat16 the bias and
//   the bias gradient are float32 (the other operands bfloat16).
//   dst[n,k,p,q] = bias[k] + sum_{c,r,s} src[n, g*C/groups + c, p*stride_h - pad_h + r*dilation_h,
//                                           q*stride_w - pad_w + s*dilation_w] * wei[k, c, r, s]
// where g = k / (K/groups); taps outside the input read zero. pad_h/pad_w are the top/left
// padding; the bottom/right padding is whatever the output size P, Q implies (it may be negative
// when the last input rows are never read, or differ from the top for transposed convolution).
//   Test: ctest --test-dir build -R conv
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

struct ConvDesc {
  DType dtype = DType::float32;
  int64_t N = 1, C = 1, H = 1, W = 1;  // batch, input channels, input height and width
  int64_t K = 1, R = 1, S = 1;         // output channels, kernel height and width
  int64_t P = 1, Q = 1;                // output height and width
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // top, left
  int64_t dilation_h = 1, dilation_w = 1;  // 1 = dense kernel (PyTorch's convention)
  int64_t groups = 1;
  bool has_bias = false;
  bool nhwc = false;  // activations channels-last (see above)
  bool relu = false;  // forward only: dst = max(conv + bias, 0), ReLU fused as a post-op
  // Forward only: a residual accumulated as a post-op (oneDNN's sum post-op, scale 1). dst holds
  // the residual on entry (same layout as the output) and is read before it is overwritten:
  // dst = conv + bias + dst_in, then the ReLU if relu. A kernel that does not implement it must
  // refuse the descriptor in its supports() predicate; the op layer then runs conv, add and ReLU
  // as separate ops.
  bool sum = false;
  // Forward only, not part of str(): non-zero when the caller names the weights' values with it
  // (engine: Tensor::values_key, set where nothing trains the weights in this call, as in
  // inference). A kernel may keep what it derives from the weights under this key (the native
  // backend keeps them packed) and must check the weights' address and shape with it.
  uint64_t weights_key = 0;

  // Offsets of element (n, c, h, w) of src and (n, k, p, q) of dst in the descriptor's layout.
  int64_t src_at(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
  }
  int64_t dst_at(int64_t n, int64_t k, int64_t p, int64_t q) const {
    return nhwc ? ((n * P + p) * Q + q) * K + k : ((n * K + k) * P + p) * Q + q;
  }

  // "float32 mb2ic3ih9iw9oc4oh5ow5kh3kw3sh2sw2ph1pw1dh1dw1g1" (+ " nobias" without bias,
  // + " nhwc" channels-last, + " sum" and " relu" for the post-ops).
  std::string str() const;
  // The problem part of str(), oneDNN benchdnn style. Unlike benchdnn, dh/dw are the dilation
  // itself (1 = dense), not the number of holes (benchdnn's dh0 = dense).
  std::string problem() const;
  // Fills P, Q from the input, kernel, stride, top/left padding and dilation, assuming the
  // bottom/right padding equals the top/left one (PyTorch's conv2d).
  void set_output_size();
  // Multiply-adds times two of one pass (forward, backward-data and backward-weights alike).
  double flops() const { return 2.0 * double(N) * double(K) * double(P) * double(Q) * double(C / groups) * double(R) * double(S); }
  int64_t src_elems() const { return N * C * H * W; }
  int64_t wei_elems() const { return K * (C / groups) * R * S; }
  int64_t dst_elems() const { return N * K * P * Q; }
};

// Output extent of a convolution along one axis with symmetric padding:
// (in + 2*pad - dilation*(kernel-1) - 1) / stride + 1, or 0 (or less) if the kernel does not fit.
inline int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

// Output extent of a transposed convolution along one axis (PyTorch's ConvTranspose2d):
// (in - 1)*stride - 2*pad + dilation*(kernel-1) + output_padding + 1.
inline int64_t conv_transpose_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                          int64_t output_padding, int64_t dilation) {
  return (in - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1;
}

// Parses a benchdnn-style problem string ("mb16ic64ih56oc64oh56kh3ph1", "g32mb8ic32ih14oc32kh3ph1";
// fields in any order, dilation as in problem()). Missing width fields copy the height ones;
// missing oh/ow are computed; mb defaults to 2, strides and dilations to 1, padding to 0, g to 1.
// Throws kiln::Error naming the string on a malformed field.
ConvDesc parse_conv_problem(const std::string& s, DType dtype = DType::float32, bool has_bias = true);

}  // namespace kiln
