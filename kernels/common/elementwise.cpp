#include "kernels/common/elementwise.h"

namespace kiln {

const char* unary_op_name(UnaryOp op) {
  static const char* names[] = {"identity", "neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt",
                                "square", "reciprocal", "sin", "cos", "relu", "leaky_relu",
                                "sigmoid", "tanh", "gelu", "pow_scalar", "add_scalar", "mul_scalar",
                                "clamp_min", "clamp_max"};
  return names[int(op)];
}

const char* binary_op_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow",
                                "eq", "ne", "gt", "ge", "lt", "le", "relu_bwd", "leaky_relu_bwd",
                                "sigmoid_bwd", "tanh_bwd", "gelu_bwd"};
  return names[int(op)];
}

const char* compare_op_name(CompareOp op) {
  static const char* names[] = {"eq", "ne", "gt", "ge", "lt", "le", "logical_and", "logical_or", "logical_xor"};
  return names[int(op)];
}

bool integer_unary_op(UnaryOp op) {
  switch (op) {
    case UnaryOp::identity: case UnaryOp::neg: case UnaryOp::abs: case UnaryOp::sign: case UnaryOp::square:
    case UnaryOp::relu: case UnaryOp::add_scalar: case UnaryOp::mul_scalar: case UnaryOp::clamp_min:
    case UnaryOp::clamp_max:
      return true;
    default:
      return false;
  }
}

bool integer_binary_op(BinaryOp op) {
  return op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul || op == BinaryOp::maximum ||
         op == BinaryOp::minimum;
}

std::string CompareDesc::str() const {
  return std::string(compare_op_name(op)) + " " + dtype_name(dtype) + " " + loop.str();
}

std::string UnaryDesc::str() const {
  return std::string(unary_op_name(op)) + " " + dtype_name(dtype) + " " + loop.str();
}
std::string BinaryDesc::str() const {
  return std::string(binary_op_name(op)) + " " + dtype_name(dtype) + " " + loop.str();
}
std::string CopyDesc::str() const {
  return std::string("copy ") + dtype_name(src_dtype) + "->" + dtype_name(dst_dtype) + " " + loop.str();
}
std::string FillDesc::str() const { return std::string("fill ") + dtype_name(dtype) + " " + loop.str(); }
std::string RandomDesc::str() const { return std::string("random ") + dtype_name(dtype) + " " + loop.str(); }

}  // namespace kiln
