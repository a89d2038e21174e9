// 2-d convolution and transposed convolution on NCHW tensors, differentiable in input, weight
// and bias (PyTorch's conv2d / conv_transpose2d semantics). Operands share dtype and device;
// float16/bfloat16 compute in float32 and store back. Inputs may be non-contiguous (copied).
// Kernels: registry ops conv2d_fwd, conv2d_bwd_data, conv2d_bwd_weights (native float32 via
// im2col + GEMM, ref in any float type). Transposed convolution runs on the same three kernels:
// its forward is conv backward-data, its backward-data is conv forward, its backward-weights is
// conv backward-weights with input and output swapped.
//   Test: ctest --test-dir build -R conv
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace kiln::ops {

// A (height, width) pair; one integer means the same for both (PyTorch's `_pair`).
struct ConvHW {
  int64_t h = 0, w = 0;
  ConvHW(int64_t v = 0) : h(v), w(v) {}  // NOLINT: implicit on purpose, conv2d(x, w, b, 2, 1)
  ConvHW(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const ConvHW& o) const { return h == o.h && w == o.w; }
  std::string str() const;  // "(3, 2)"
};

// x [N, C, H, W], weight [K, C/groups, R, S], bias [K] or undefined -> [N, K, P, Q] with
// P = (H + 2*padding.h - dilation.h*(R-1) - 1) / stride.h + 1 (same for Q).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), ConvHW stride = 1,
              ConvHW padding = 0, ConvHW dilation = 1, int64_t groups = 1);
// relu(conv2d(...)) in one kernel call: the ReLU is a post-op of the convolution (oneDNN's eltwise
// post-op, a pass over the output on native); backward masks the gradient by the output > 0.
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), ConvHW stride = 1,
                   ConvHW padding = 0, ConvHW dilation = 1, int64_t groups = 1);

// conv2d(...) + residual, then the ReLU when `relu`, in one kernel call where a backend takes the
// residual as a post-op (ConvDesc::sum; oneDNN's sum then eltwise post-ops): ResNet's last
// convolution of a block with its shortcut add. residual: the output's shape [N, K, P, Q], dtype
// and device, any layout; it is read, never written. Where no kernel of the current preference
// takes the fused descriptor the convolution, add and ReLU run as separate ops (same values).
// Differentiable in x, weight, bias and residual (the residual's gradient is the output's,
// masked by output > 0 with the ReLU).
Tensor conv2d_sum(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual, ConvHW stride = 1,
                  ConvHW padding = 0, ConvHW dilation = 1, int64_t groups = 1, bool relu = true);

// x [N, C_in, H, W], weight [C_in, C_out/groups, R, S] (PyTorch's layout), bias [C_out] or
// undefined -> [N, C_out, H', W'] with H' = (H-1)*stride.h - 2*padding.h + dilation.h*(R-1)
// + output_padding.h + 1; output_padding must be smaller than stride or dilation.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), ConvHW stride = 1,
                        ConvHW padding = 0, ConvHW output_padding = 0, ConvHW dilation = 1, int64_t groups = 1);

}  // namespace kiln::ops
