// Convolution layers: Conv2d and ConvTranspose2d (NCHW), with PyTorch's argument order, default
// initialisation (kaiming-uniform a=sqrt(5) for the weight, uniform(+-1/sqrt(fan_in)) for the
// bias) and state-dict names ("weight", "bias"). Sizes take one integer or {h, w}.
//   Test: ctest --test-dir build -R conv
#pragma once

#include "engine/ops/conv.h"
#include "layers/module.h"

namespace kiln {

using ops::ConvHW;

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

 private:
  int64_t in_, out_, groups_;
  ConvHW kernel_, stride_, padding_, dilation_;
  bool has_bias_;
};

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
