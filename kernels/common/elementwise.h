// Elementwise op descriptors and their scalar math, written once as host+device functors so the
// CPU kernels, the CUDA kernels and the emulator share one definition of each function.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/dtype.h"
#include "kernels/common/loop.h"

#include "kernels/common/host_device.h"

namespace kiln {

enum class UnaryOp : uint8_t {
  identity, neg, abs, sign, exp, log, sqrt, rsqrt, square, reciprocal, sin, cos,
  relu, leaky_relu,  // alpha: negative slope
  sigmoid, tanh, gelu,  // gelu: exact (erf) form
  pow_scalar,           // x^alpha
  add_scalar,           // x + alpha
  mul_scalar,           // x * alpha
  clamp_min,            // max(x, alpha)
  clamp_max,            // min(x, alpha)
};

enum class BinaryOp : uint8_t {
  add, sub, mul, div, maximum, minimum, pow,
  eq, ne, gt, ge, lt, le,  // 1 or 0 in the operands' dtype
  // Activation backward: a = upstream gradient, b = the saved tensor named in the comment.
  relu_bwd,        // b = input x
  leaky_relu_bwd,  // b = input x, alpha = slope
  sigmoid_bwd,     // b = output y
  tanh_bwd,        // b = output y
  gelu_bwd,        // b = input x
};

// Comparisons and logical ops: a and b of one dtype, the result boolean (the `compare` op).
// logical_*: nonzero is true.
enum class CompareOp : uint8_t { eq, ne, gt, ge, lt, le, logical_and, logical_or, logical_xor };

const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
const char* compare_op_name(CompareOp op);

// The ops kernels take on int32, int64 and uint8 (two's-complement wrapping, as PyTorch's):
// unary identity, neg, abs, sign, square, relu, add_scalar, mul_scalar, clamp_min, clamp_max;
// binary add, sub, mul, maximum, minimum. Division, powers and the transcendental functions
// compute in floating point (the ops promote integers first).
bool integer_unary_op(UnaryOp op);
bool integer_binary_op(BinaryOp op);

struct UnaryDesc {
  UnaryOp op = UnaryOp::identity;
  DType dtype = DType::float32;
  double alpha = 0;
  StridedLoop loop;  // operands: dst, src
  std::string str() const;
};

struct BinaryDesc {
  BinaryOp op = BinaryOp::add;
  DType dtype = DType::float32;
  double alpha = 0;
  StridedLoop loop;  // operands: dst, a, b
  std::string str() const;
};

struct CompareDesc {
  CompareOp op = CompareOp::eq;
  DType dtype = DType::float32;  // of a and b; dst is boolean
  StridedLoop loop;              // operands: dst, a, b
  std::string str() const;
};

// dst = convert(src), any dtype pair.
struct CopyDesc {
  DType src_dtype = DType::float32;
  DType dst_dtype = DType::float32;
  StridedLoop loop;  // operands: dst, src
  std::string str() const;
};

struct FillDesc {
  DType dtype = DType::float32;
  double value = 0;
  StridedLoop loop;  // operands: dst
  std::string str() const;
};

// Random fills (Philox): element i (in the loop's linear order) of the draw uses counter
// offset + i/4 (uniform) or offset + i/2 (normal).
enum class RandomKind : uint8_t { uniform, normal, bernoulli };
struct RandomDesc {
  RandomKind kind = RandomKind::uniform;
  DType dtype = DType::float32;
  double a = 0, b = 1;  // uniform [a,b) | normal mean a, std b | bernoulli p = a
  uint64_t seed = 0, offset = 0;
  StridedLoop loop;  // operands: dst
  std::string str() const;
};

namespace fn {

template <class T>
KILN_HOST_DEVICE inline T unary(UnaryOp op, T x, T alpha) {
  using std::exp; using std::log; using std::sqrt; using std::tanh; using std::erf; using std::pow;
  using std::sin; using std::cos; using std::abs;
  switch (op) {
    case UnaryOp::identity: return x;
    case UnaryOp::neg: return -x;
    case UnaryOp::abs: return abs(x);
    case UnaryOp::sign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case UnaryOp::exp: return exp(x);
    case UnaryOp::log: return log(x);
    case UnaryOp::sqrt: return sqrt(x);
    case UnaryOp::rsqrt: return T(1) / sqrt(x);
    case UnaryOp::square: return x * x;
    case UnaryOp::reciprocal: return T(1) / x;
    case UnaryOp::sin: return sin(x);
    case UnaryOp::cos: return cos(x);
    case UnaryOp::relu: return x > T(0) ? x : T(0);
    case UnaryOp::leaky_relu: return x > T(0) ? x : x * alpha;
    case UnaryOp::sigmoid: return T(1) / (T(1) + exp(-x));
    case UnaryOp::tanh: return tanh(x);
    case UnaryOp::gelu: return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
    case UnaryOp::pow_scalar: return pow(x, alpha);
    case UnaryOp::add_scalar: return x + alpha;
    case UnaryOp::mul_scalar: return x * alpha;
    case UnaryOp::clamp_min: return x > alpha ? x : alpha;
    case UnaryOp::clamp_max: return x < alpha ? x : alpha;
  }
  return x;
}

// Integer math without undefined behaviour: sums and products wrap modulo 2^bits (computed in
// the unsigned type), as PyTorch's integer tensors do. Ops outside integer_unary_op return x.
template <class T>
KILN_HOST_DEVICE inline T int_unary(UnaryOp op, T x, T alpha) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case UnaryOp::neg: return T(U(0) - U(x));
    case UnaryOp::abs:
      if constexpr (std::is_signed_v<T>) return x < T(0) ? T(U(0) - U(x)) : x;
      else return x;
    case UnaryOp::sign:
      if constexpr (std::is_signed_v<T>) return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
      else return x > T(0) ? T(1) : T(0);
    case UnaryOp::square: return T(U(x) * U(x));
    case UnaryOp::relu:
      if constexpr (std::is_signed_v<T>) return x > T(0) ? x : T(0);
      else return x;
    case UnaryOp::add_scalar: return T(U(x) + U(alpha));
    case UnaryOp::mul_scalar: return T(U(x) * U(alpha));
    case UnaryOp::clamp_min: return x > alpha ? x : alpha;
    case UnaryOp::clamp_max: return x < alpha ? x : alpha;
    default: return x;
  }
}

template <class T>
KILN_HOST_DEVICE inline T int_binary(BinaryOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BinaryOp::add: return T(U(a) + U(b));
    case BinaryOp::sub: return T(U(a) - U(b));
    case BinaryOp::mul: return T(U(a) * U(b));
    case BinaryOp::maximum: return a > b ? a : b;
    case BinaryOp::minimum: return a < b ? a : b;
    default: return a;
  }
}

template <class T>
KILN_HOST_DEVICE inline bool compare(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::eq: return a == b;
    case CompareOp::ne: return a != b;
    case CompareOp::gt: return a > b;
    case CompareOp::ge: return a >= b;
    case CompareOp::lt: return a < b;
    case CompareOp::le: return a <= b;
    case CompareOp::logical_and: return (a != T(0)) && (b != T(0));
    case CompareOp::logical_or: return (a != T(0)) || (b != T(0));
    case CompareOp::logical_xor: return (a != T(0)) != (b != T(0));
  }
  return false;
}

template <class T>
KILN_HOST_DEVICE inline T binary(BinaryOp op, T a, T b, T alpha) {
  using std::exp; using std::pow;
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::maximum: return a > b ? a : b;
    case BinaryOp::minimum: return a < b ? a : b;
    case BinaryOp::pow: return pow(a, b);
    case BinaryOp::eq: return a == b ? T(1) : T(0);
    case BinaryOp::ne: return a != b ? T(1) : T(0);
    case BinaryOp::gt: return a > b ? T(1) : T(0);
    case BinaryOp::ge: return a >= b ? T(1) : T(0);
    case BinaryOp::lt: return a < b ? T(1) : T(0);
    case BinaryOp::le: return a <= b ? T(1) : T(0);
    case BinaryOp::relu_bwd: return b > T(0) ? a : T(0);
    case BinaryOp::leaky_relu_bwd: return b > T(0) ? a : a * alpha;
    case BinaryOp::sigmoid_bwd: return a * b * (T(1) - b);
    case BinaryOp::tanh_bwd: return a * (T(1) - b * b);
    case BinaryOp::gelu_bwd: {
      // d/dx [x Phi(x)] = Phi(x) + x phi(x)
      T cdf = T(0.5) * (T(1) + std::erf(b * T(0.70710678118654752440)));
      T pdf = exp(T(-0.5) * b * b) * T(0.39894228040143267794);
      return a * (cdf + b * pdf);
    }
  }
  return a;
}

}  // namespace fn
}  // namespace kiln
