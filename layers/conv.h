// Convolution layers: Conv2d and ConvTranspose2d (NCHW), with PyTorch's argument order, default
// initialisation (kaiming-uniform a=sqrt(5) for the weight, uniform(+-1/sqrt(fan_in)) for the
// bias) and state-dict names ("weight", "bias"). Sizes take one integer or {h, w}.
// In eval mode a Conv2d followed by a BatchNorm2d runs as one convolution with the batch norm
// folded into its weights (conv_bn below; what onnxruntime does at load).
//   Test: ctest --test-dir build -R 'conv|fold'
#pragma once

#include <memory>
#include <utility>

#include "engine/ops/conv.h"
#include "layers/module.h"

namespace kiln {

using ops::ConvHW;
class BatchNorm;

// A batch norm folded into the convolution before it, for inference: weight * scale and
// beta + (bias - mean) * scale with scale = gamma / sqrt(var + eps) per output channel (bias,
// gamma, beta may be undefined: 0, 1, 0). get() returns the folded (weight, bias), computed once
// and again only when a source tensor is replaced or written in place (its storage's version:
// load_state_dict, optimizer steps, running statistics a training forward updated). The factors
// are computed in double on the host, the weights scaled on their device in their dtype. Holds
// one folded copy of the weights; not thread-safe.
class BatchNormFold {
 public:
  BatchNormFold();
  ~BatchNormFold();
  std::pair<Tensor, Tensor> get(const Tensor& weight, const Tensor& bias, const Tensor& gamma, const Tensor& beta,
                                const Tensor& mean, const Tensor& var, double eps);
  void reset();  // drops the folded copy
  int64_t count() const { return count_; }  // computations so far (tests see hits and misses)

 private:
  struct State;
  std::shared_ptr<State> state_;
  int64_t count_ = 0;
};

class Conv2d : public Module {
 public:
  // weight [out, in/groups, kernel.h, kernel.w], bias [out].
  Conv2d(int64_t in_channels, int64_t out_channels, ConvHW kernel_size, ConvHW stride = 1, ConvHW padding = 0,
         ConvHW dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) as one fused convolution (ops::conv2d_relu).
  Tensor forward_relu(const Tensor& x);
  std::string repr() const override;

  Tensor weight() { return param("weight"); }
  Tensor bias();  // undefined without bias

  // Batch norm folded into this convolution (eval only). can_fold: fusion is on
  // (Sequential::fusion(), KILN_FUSE), both modules are in eval mode, `bn` is a BatchNorm2d over
  // this layer's output channels with running statistics, no gradient is wanted for the
  // parameters of either (NoGradGuard, or none requires grad), x has the weights' dtype (float32
  // or float64), and no op recorder is tracing (ONNX export sees the modules as they are).
  bool can_fold(BatchNorm& bn, const Tensor& x);
  // bn(conv(x)) [+ residual], then the ReLU when `relu`, as one convolution: weights scaled by
  // gamma / sqrt(var + eps) per output channel, bias beta + (b - mean) * scale; the residual and
  // ReLU as post-ops (ops::conv2d_sum, ops::conv2d_relu). The folded weights are cached here
  // and recomputed when any source tensor is replaced (load to another device or dtype) or
  // written in place (its storage version: load_state_dict, optimizer steps, running statistics
  // updated by a training forward); train(true) drops them. Call only where can_fold says yes.
  Tensor forward_folded(const Tensor& x, BatchNorm& bn, bool relu, const Tensor& residual = Tensor());
  // How many times the folded weights were computed (tests see the cache hit and invalidate).
  int64_t fold_count() const { return fold_.count(); }

 protected:
  void train_changed(bool training) override;

 private:
  int64_t in_, out_, groups_;
  ConvHW kernel_, stride_, padding_, dilation_;
  bool has_bias_;
  BatchNormFold fold_;
  const BatchNorm* folded_bn_ = nullptr;
};

// [relu](bn(conv(x)) [+ residual]): folded into one convolution when conv.can_fold(bn, x),
// else the modules one after another as before (the add, then the ReLU, for a residual). relu
// may be null (none); an undefined residual means none. The batch norm and ReLU modules still
// get their (empty) calls when folded, so per-layer profiles keep their rows. Sequential runs
// Conv2d, BatchNorm2d[, ReLU] children through it; ResNet's blocks their conv-bn pairs, the
// last one with the shortcut as the residual.
Tensor conv_bn(Conv2d& conv, BatchNorm& bn, Module* relu, const Tensor& x, const Tensor& residual = Tensor());

class ConvTranspose2d : public Module {
 public:
  // weight [in, out/groups, kernel.h, kernel.w], bias [out].
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ConvHW kernel_size, ConvHW stride = 1,
                  ConvHW padding = 0, ConvHW output_padding = 0, int64_t groups = 1, bool bias = true,
                  ConvHW dilation = 1);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

  Tensor weight() { return param("weight"); }
  Tensor bias();  // undefined without bias

 private:
  int64_t in_, out_, groups_;
  ConvHW kernel_, stride_, padding_, output_padding_, dilation_;
  bool has_bias_;
};

}  // namespace kiln
