// Shape layers without parameters: Upsample (nearest / bilinear, by scale or to a size) and the
// 2-d padding modules ZeroPad2d, ConstantPad2d, ReflectionPad2d, ReplicationPad2d (torch.nn's).
// Padding is {left, right, top, bottom}, or one value for all four.
//   tests: ctest --test-dir build -R pool_layers
#pragma once

#include <array>

#include "engine/ops/shape.h"
#include "layers/module.h"

namespace kiln {

class Upsample : public Module {
 public:
  // By a scale factor for both dims (output floor(in * scale)).
  explicit Upsample(double scale_factor, UpsampleMode mode = UpsampleMode::nearest, bool align_corners = false);
  // To an output size {oh, ow}.
  explicit Upsample(std::array<int64_t, 2> size, UpsampleMode mode = UpsampleMode::nearest,
                    bool align_corners = false);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 2> size_{0, 0};
  double scale_ = 0;
  UpsampleMode mode_;
  bool align_corners_;
};

class ConstantPad2d : public Module {
 public:
  ConstantPad2d(int64_t padding, double value) : ConstantPad2d({padding, padding, padding, padding}, value) {}
  ConstantPad2d(std::array<int64_t, 4> padding, double value) : pads_(padding), value_(value) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 protected:
  std::array<int64_t, 4> pads_;
  double value_;
};

class ZeroPad2d : public ConstantPad2d {
 public:
  explicit ZeroPad2d(int64_t padding) : ConstantPad2d(padding, 0.0) {}
  explicit ZeroPad2d(std::array<int64_t, 4> padding) : ConstantPad2d(padding, 0.0) {}
  std::string repr() const override;
};

class ReflectionPad2d : public Module {
 public:
  explicit ReflectionPad2d(int64_t padding) : pads_{padding, padding, padding, padding} {}
  explicit ReflectionPad2d(std::array<int64_t, 4> padding) : pads_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 4> pads_;
};

class ReplicationPad2d : public Module {
 public:
  explicit ReplicationPad2d(int64_t padding) : pads_{padding, padding, padding, padding} {}
  explicit ReplicationPad2d(std::array<int64_t, 4> padding) : pads_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

 private:
  std::array<int64_t, 4> pads_;
};

}  // namespace kiln
