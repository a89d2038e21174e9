// Elementwise arithmetic and activations with NumPy broadcasting, differentiable.
// Operands must share a device; their dtypes are promoted as PyTorch's (result_type: boolean <
// integer < floating point, the wider type within one; a zero-dim operand counts only when of a
// higher category). float16/bfloat16 compute in float32 and store back. Integer tensors
// (int32, int64, uint8) take add, sub, mul, maximum, minimum, neg, abs, square, relu and clamp
// in their dtype (wrapping on overflow); div and the transcendental functions compute them in
// float32. Comparisons and logical ops return booleans. A dtype an op cannot take is a
// kiln::Error saying "<op>: dtype <t> is not supported".
#pragma once

#include <vector>

#include "engine/scalar.h"
#include "engine/tensor.h"

namespace kiln::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b is differentiated

// The dtype of an op on a and b (torch.result_type), and on a tensor and a number: an integer
// tensor with a floating-point number gives float32, with an integer its own dtype.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& s);

Tensor add(const Tensor& a, const Scalar& s);
Tensor mul(const Tensor& a, const Scalar& s);
Tensor pow(const Tensor& a, double p);
// Bounds as numbers; the gradient passes where lo <= a <= hi. clamp throws kiln::Error for lo > hi.
Tensor clamp_min(const Tensor& a, const Scalar& lo);
Tensor clamp_max(const Tensor& a, const Scalar& hi);
Tensor clamp(const Tensor& a, const Scalar& lo, const Scalar& hi);

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

// Comparisons and logical ops: boolean results (any operand dtypes, promoted), not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& s);
Tensor ne(const Tensor& a, const Scalar& s);
Tensor gt(const Tensor& a, const Scalar& s);
Tensor ge(const Tensor& a, const Scalar& s);
Tensor lt(const Tensor& a, const Scalar& s);
Tensor le(const Tensor& a, const Scalar& s);
Tensor logical_and(const Tensor& a, const Tensor& b);  // nonzero is true
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

// Kernel-level building blocks (no autograd): y = f(x) / y = f(a, b) into a new tensor.
Tensor unary_raw(int op, const Tensor& x, double alpha = 0);                   // op: UnaryOp
Tensor binary_raw(int op, const Tensor& a, const Tensor& b, double alpha = 0);  // op: BinaryOp
Tensor compare_raw(int op, const Tensor& a, const Tensor& b);                   // op: CompareOp; boolean

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
Tensor operator+(const Tensor& a, const Scalar& s);
Tensor operator-(const Tensor& a, const Scalar& s);
Tensor operator*(const Tensor& a, const Scalar& s);
Tensor operator/(const Tensor& a, const Scalar& s);  // true division: integers give float32
Tensor operator+(const Scalar& s, const Tensor& a);
Tensor operator-(const Scalar& s, const Tensor& a);
Tensor operator*(const Scalar& s, const Tensor& a);
// Comparisons as in LibTorch: boolean tensors, not bools.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& s);
Tensor operator!=(const Tensor& a, const Scalar& s);
Tensor operator>(const Tensor& a, const Scalar& s);
Tensor operator>=(const Tensor& a, const Scalar& s);
Tensor operator<(const Tensor& a, const Scalar& s);
Tensor operator<=(const Tensor& a, const Scalar& s);
}  // namespace kiln
