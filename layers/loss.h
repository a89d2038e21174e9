// Loss objects in PyTorch's shape: built with their options, called with (input, target).
// Not Modules: a Module's forward takes one tensor, and losses have no parameters or state.
// Test: ctest --test-dir build -R norm_layers
#pragma once

#include <string>

#include "engine/ops/loss.h"

namespace kiln {

class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::mean, double label_smoothing = 0.0,
                            int64_t ignore_index = -100);
  // input: logits [N, C, ...]; target: int64 class indices [N, ...].
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  std::string repr() const;

 private:
  Reduction reduction_;
  double label_smoothing_;
  int64_t ignore_index_;
};

class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::mean, int64_t ignore_index = -100)
      : reduction_(reduction), ignore_index_(ignore_index) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  std::string repr() const;

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

class BCEWithLogitsLoss {
 public:
  // pos_weight: undefined, or broadcastable to the input (usually [C]).
  explicit BCEWithLogitsLoss(Reduction reduction = Reduction::mean, Tensor pos_weight = Tensor())
      : reduction_(reduction), pos_weight_(std::move(pos_weight)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  std::string repr() const;

 private:
  Reduction reduction_;
  Tensor pos_weight_;
};

class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  std::string repr() const;

 private:
  Reduction reduction_;
};

}  // namespace kiln
