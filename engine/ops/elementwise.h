// Elementwise arithmetic and activations with NumPy broadcasting, differentiable.
// Operands must share dtype and device. float16/bfloat16 compute in float32 and store back.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace kiln::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b is differentiated

Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor pow(const Tensor& a, double p);
Tensor clamp_min(const Tensor& a, double lo);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);

Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x)

// Comparisons: 1 or 0 in the operands' dtype, not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);

// Kernel-level building blocks (no autograd): y = f(x) / y = f(a, b) into a new tensor.
Tensor unary_raw(int op, const Tensor& x, double alpha = 0);                   // op: UnaryOp
Tensor binary_raw(int op, const Tensor& a, const Tensor& b, double alpha = 0);  // op: BinaryOp

// Sum of `t` reduced to `shape` (the reverse of broadcasting `shape` to t's shape).
Tensor sum_to(const Tensor& t, const Shape& shape);


// Elementwise sum of n tensors of one shape, dtype and device, in one pass (the "sum" op:
// gradient accumulation of a tensor read by several consumers, residual adds); inputs added in
// order. Differentiable: every input's gradient is the output's.
Tensor add_n(const std::vector<Tensor>& xs);

}  // namespace kiln::ops

namespace kiln {
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
}  // namespace kiln
