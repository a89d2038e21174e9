// Pooling and normalisation layers without parameters: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
// AdaptiveMaxPool2d, LocalResponseNorm (the torch.nn modules of the same names). Pairs are
// {height, width}; the integer constructors use one value for both. stride 0 = kernel.
//   tests: ctest --test-dir build -R pool_layers
#pragma once

#include <array>
#include <optional>

#include "layers/module.h"

namespace kiln {

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, int64_t dilation = 1,
                     bool ceil_mode = false)
      : MaxPool2d({kernel, kernel}, {stride, stride}, {padding, padding}, {dilation, dilation}, ceil_mode) {}
  MaxPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding = {0, 0},
            std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 2> kernel_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt)
      : AvgPool2d({kernel, kernel}, {stride, stride}, {padding, padding}, ceil_mode, count_include_pad,
                  divisor_override) {}
  AvgPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding = {0, 0},
            bool ceil_mode = false, bool count_include_pad = true,
            std::optional<int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 2> kernel_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<int64_t> divisor_override_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t size) : size_{size, size} {}
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> size) : size_(size) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 2> size_;
};

class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(int64_t size) : size_{size, size} {}
  explicit AdaptiveMaxPool2d(std::array<int64_t, 2> size) : size_(size) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 2> size_;
};

class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0)
      : size_(size), alpha_(alpha), beta_(beta), k_(k) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t size_;
  double alpha_, beta_, k_;
};

}  // namespace kiln
