// Activation layers (no parameters): ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Flatten.
#pragma once

#include "layers/module.h"

namespace kiln {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "ReLU"; }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : slope_(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "LeakyReLU(" + std::to_string(slope_) + ")"; }

 private:
  double slope_;
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Sigmoid"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Tanh"; }
};

class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "GELU"; }
};

// Flattens dims [start_dim, end_dim] (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_, end_); }
  std::string repr() const override { return "Flatten"; }

 private:
  int64_t start_, end_;
};

}  // namespace kiln
