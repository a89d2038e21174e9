// Linear (fully connected) layer: y = x weight^T + bias, as torch.nn.Linear (same init, same
// state-dict names "weight" [out, in] and "bias" [out]).
//   ctest --test-dir build -R test_linear_layers
#pragma once

#include "layers/module.h"

namespace kiln {

class Linear : public Module {
 public:
  // weight ~ kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); bias ~ U(-1/sqrt(in), 1/sqrt(in)).
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;  // x [..., in] -> [..., out]
  std::string repr() const override;
  // Re-draws the parameters from the default generator (as at construction).
  void reset_parameters();

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Tensor& weight() { return param("weight"); }
  Tensor bias();  // undefined when built with bias = false

 private:
  int64_t in_, out_;
  bool has_bias_;
};

}  // namespace kiln
