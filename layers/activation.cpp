#include "layers/activation.h"

#include "engine/ops/elementwise.h"

namespace kiln {

Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }
Tensor LeakyReLU::forward(const Tensor& x) { return ops::leaky_relu(x, slope_); }
Tensor Sigmoid::forward(const Tensor& x) { return ops::sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return ops::tanh(x); }
Tensor GELU::forward(const Tensor& x) { return ops::gelu(x); }

}  // namespace kiln
