#include "kernels/common/elementwise.h"

namespace kiln {

const char* unary_op_name(UnaryOp op) {
  static const char* names[] = {"identity", "neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt",
                                "square", "reciprocal", "sin", "cos", "relu", "leaky_relu",
                                "sigmoid", "tanh", "gelu", "pow_scalar", "add_scalar", "mul_scalar",
                                "clamp_min"};
  return names[int(op)];
}

const char* binary_op_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow",
                                "eq", "ne", "gt", "ge", "lt", "le", "relu_bwd", "leaky_relu_bwd",
                                "sigmoid_bwd", "tanh_bwd", "gelu_bwd"};
  return names[int(op)];
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
