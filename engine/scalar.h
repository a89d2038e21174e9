// Scalar: a number as an op's operand, remembering whether it was written as an integer, a
// boolean or a floating-point value (c10::Scalar). It decides the result dtype of tensor-scalar
// ops as in PyTorch: an int64 tensor plus 2 stays int64, plus 2.5 becomes float32; a float32
// tensor stays float32 with any scalar.
#pragma once

#include <cstdint>
#include <type_traits>

#include "engine/dtype.h"

namespace kiln {

class Scalar {
 public:
  Scalar(double v) : d_(v), i_(int64_t(0)), kind_(Kind::floating) {}  // NOLINT: numbers convert implicitly
  Scalar(float v) : Scalar(double(v)) {}                              // NOLINT
  Scalar(bool v) : d_(v ? 1.0 : 0.0), i_(v ? 1 : 0), kind_(Kind::boolean) {}  // NOLINT
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) : d_(double(v)), i_(int64_t(v)), kind_(Kind::integral) {}  // NOLINT

  bool is_floating_point() const { return kind_ == Kind::floating; }
  bool is_integral() const { return kind_ == Kind::integral; }
  bool is_boolean() const { return kind_ == Kind::boolean; }
  double to_double() const { return d_; }
  int64_t to_int64() const { return kind_ == Kind::floating ? int64_t(d_) : i_; }
  // The dtype PyTorch gives a tensor made of this number: float32 (the default dtype), int64, bool.
  DType dtype() const { return is_floating_point() ? DType::float32 : is_integral() ? DType::int64 : DType::boolean; }

 private:
  double d_;
  int64_t i_;
  enum class Kind : uint8_t { floating, integral, boolean } kind_;
};

}  // namespace kiln
