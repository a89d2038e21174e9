#include "layers/activation.h"

#include "engine/ops/elementwise.h"

namespace kiln {

Tensor ReLU::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::relu(x);
}
Tensor LeakyReLU::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::leaky_relu(x, slope_);
}
Tensor Sigmoid::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::sigmoid(x);
}
Tensor Tanh::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::tanh(x);
}
Tensor GELU::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::gelu(x);
}

}  // namespace kiln
