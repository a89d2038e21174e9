// Linear layer: parameters and PyTorch's default init; forward is ops::linear.
//   ctest --test-dir build -R test_linear_layers
#include "layers/linear.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops/linalg.h"
#include "engine/random.h"
#include "layers/init.h"

namespace kiln {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  KILN_CHECK(in_features >= 0 && out_features >= 0, "Linear: negative size (in ", in_features, ", out ",
             out_features, ")");
  register_parameter("weight", empty({out_, in_}).requires_grad_(true));
  if (has_bias_) register_parameter("bias", empty({out_}).requires_grad_(true));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
  const double bound = in_ > 0 ? 1.0 / std::sqrt(double(in_)) : 0.0;
  init::uniform_(param("weight"), -bound, bound);
  if (has_bias_) init::uniform_(param("bias"), -bound, bound);
}

Tensor Linear::bias() { return has_bias_ ? param("bias") : Tensor(); }

Tensor Linear::forward(const Tensor& x) {
  const CallScope scope(*this);
  // Mixed precision (a half-type input, float32 master weights): on the CPU the product runs in
  // float32 on the input's float32 copy and comes back in the input's type; on CUDA it takes half
  // copies of the weights (their gradients flow back to the float32 masters), so ops::linear
  // runs it in the half type on cuBLAS's tensor cores where it can (else on float32 copies).
  const Tensor& w = param("weight");
  if (x.dtype() != w.dtype() && (x.dtype() == DType::bfloat16 || x.dtype() == DType::float16) &&
      w.dtype() == DType::float32) {
    if (x.device().type == DeviceType::cuda)
      return ops::linear(x, w.to(x.dtype()), has_bias_ ? bias().to(x.dtype()) : Tensor());
    return ops::linear(x.to(DType::float32), w, bias()).to(x.dtype());
  }
  return ops::linear(x, w, bias());
}

std::string Linear::repr() const {
  return "Linear(in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
         ", bias=" + (has_bias_ ? "True" : "False") + ")";
}

}  // namespace kiln
