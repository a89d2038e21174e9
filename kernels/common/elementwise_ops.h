// with_unary_op / with_binary_op (and the integer and compare forms below): turn a run-time UnaryOp/BinaryOp into a compile-time constant,
// so each backend's elementwise loop is instantiated once per op (the CPU native kernels and
// kiln's own CUDA kernels share this one list; a new op is added here and in fn::unary/binary).
//   f is called as f(std::integral_constant<UnaryOp, UnaryOp::relu>{}) etc.
// Host code only (the CUDA kernels call it from their host wrappers).
#pragma once

#include <type_traits>

#include "kernels/common/elementwise.h"
#include "kernels/common/error.h"

namespace kiln {

template <class F>
void with_unary_op(UnaryOp op, F&& f) {
#define KILN_CASE(name) case UnaryOp::name: return f(std::integral_constant<UnaryOp, UnaryOp::name>{});
  switch (op) {
    KILN_CASE(identity) KILN_CASE(neg) KILN_CASE(abs) KILN_CASE(sign) KILN_CASE(exp) KILN_CASE(log)
    KILN_CASE(sqrt) KILN_CASE(rsqrt) KILN_CASE(square) KILN_CASE(reciprocal) KILN_CASE(sin) KILN_CASE(cos)
    KILN_CASE(relu) KILN_CASE(leaky_relu) KILN_CASE(sigmoid) KILN_CASE(tanh) KILN_CASE(gelu)
    KILN_CASE(pow_scalar) KILN_CASE(add_scalar) KILN_CASE(mul_scalar) KILN_CASE(clamp_min) KILN_CASE(clamp_max)
  }
#undef KILN_CASE
  KILN_THROW("elementwise: unknown unary op ", int(op));
}

template <class F>
void with_binary_op(BinaryOp op, F&& f) {
#define KILN_CASE(name) case BinaryOp::name: return f(std::integral_constant<BinaryOp, BinaryOp::name>{});
  switch (op) {
    KILN_CASE(add) KILN_CASE(sub) KILN_CASE(mul) KILN_CASE(div) KILN_CASE(maximum) KILN_CASE(minimum)
    KILN_CASE(pow) KILN_CASE(eq) KILN_CASE(ne) KILN_CASE(gt) KILN_CASE(ge) KILN_CASE(lt) KILN_CASE(le)
    KILN_CASE(relu_bwd) KILN_CASE(leaky_relu_bwd) KILN_CASE(sigmoid_bwd) KILN_CASE(tanh_bwd) KILN_CASE(gelu_bwd)
  }
#undef KILN_CASE
  KILN_THROW("elementwise: unknown binary op ", int(op));
}

// The same for the ops integer kernels take (integer_unary_op, integer_binary_op) and for CompareOp.
template <class F>
void with_integer_unary_op(UnaryOp op, F&& f) {
#define KILN_CASE(name) case UnaryOp::name: return f(std::integral_constant<UnaryOp, UnaryOp::name>{});
  switch (op) {
    KILN_CASE(identity) KILN_CASE(neg) KILN_CASE(abs) KILN_CASE(sign) KILN_CASE(square) KILN_CASE(relu)
    KILN_CASE(add_scalar) KILN_CASE(mul_scalar) KILN_CASE(clamp_min) KILN_CASE(clamp_max)
    default: break;
  }
#undef KILN_CASE
  KILN_THROW("elementwise: ", unary_op_name(op), " is not an integer op");
}

template <class F>
void with_integer_binary_op(BinaryOp op, F&& f) {
#define KILN_CASE(name) case BinaryOp::name: return f(std::integral_constant<BinaryOp, BinaryOp::name>{});
  switch (op) {
    KILN_CASE(add) KILN_CASE(sub) KILN_CASE(mul) KILN_CASE(maximum) KILN_CASE(minimum)
    default: break;
  }
#undef KILN_CASE
  KILN_THROW("elementwise: ", binary_op_name(op), " is not an integer op");
}

template <class F>
void with_compare_op(CompareOp op, F&& f) {
#define KILN_CASE(name) case CompareOp::name: return f(std::integral_constant<CompareOp, CompareOp::name>{});
  switch (op) {
    KILN_CASE(eq) KILN_CASE(ne) KILN_CASE(gt) KILN_CASE(ge) KILN_CASE(lt) KILN_CASE(le)
    KILN_CASE(logical_and) KILN_CASE(logical_or) KILN_CASE(logical_xor)
  }
#undef KILN_CASE
  KILN_THROW("elementwise: unknown compare op ", int(op));
}

}  // namespace kiln
