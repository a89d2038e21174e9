// Element types. float64 exists so that the `ref` backend and the gradient checks can run the
// same ops in double precision (the oracle); float16/bfloat16 store and convert, compute is float32.
// Integers (int32, int64, uint8) and boolean (one byte, 0 or 1: what comparisons return) take the
// arithmetic, comparison and logical ops and the sums; promote_types is PyTorch's rule for mixing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

#include "kernels/common/half.h"

namespace kiln {

enum class DType : uint8_t { float32, float64, float16, bfloat16, int32, int64, uint8, boolean };

constexpr DType float32 = DType::float32;
constexpr DType float64 = DType::float64;
constexpr DType float16 = DType::float16;
constexpr DType bfloat16 = DType::bfloat16;
constexpr DType int32 = DType::int32;
constexpr DType int64 = DType::int64;
constexpr DType uint8 = DType::uint8;
constexpr DType boolean = DType::boolean;  // torch.bool

inline size_t element_size(DType t) {
  switch (t) {
    case DType::float64: case DType::int64: return 8;
    case DType::float32: case DType::int32: return 4;
    case DType::float16: case DType::bfloat16: return 2;
    case DType::uint8: case DType::boolean: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::boolean: return "bool";
  }
  return "?";
}

inline bool is_floating(DType t) {
  return t == DType::float32 || t == DType::float64 || t == DType::float16 || t == DType::bfloat16;
}

// float16 or bfloat16: the types ops compute in float32 where no kernel takes them as they are.
inline bool is_half(DType t) { return t == DType::float16 || t == DType::bfloat16; }

// int32, int64 or uint8 (not boolean: PyTorch's is_integral(includeBool=false)).
inline bool is_integral(DType t) { return t == DType::int32 || t == DType::int64 || t == DType::uint8; }

// The dtype of an op on a and b, PyTorch's promote_types: the higher category wins (boolean <
// integer < floating point); within one, the type that holds both (uint8 and int32 -> int32,
// float16 and bfloat16 -> float32).
inline DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto category = [](DType t) { return t == DType::boolean ? 0 : is_floating(t) ? 2 : 1; };
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  auto rank = [](DType t) {
    switch (t) {
      case DType::uint8: return 0;
      case DType::int32: return 1;
      case DType::int64: return 2;
      case DType::float16: case DType::bfloat16: return 3;
      case DType::float32: return 4;
      case DType::float64: return 5;
      case DType::boolean: break;
    }
    return 0;
  };
  if (is_half(a) && is_half(b)) return DType::float32;  // float16 with bfloat16
  return rank(a) > rank(b) ? a : b;
}


inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::bfloat16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };

// Calls f(T{}) with T the C++ type of `t`.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::float16: return f(Half{});
    case DType::bfloat16: return f(BFloat16{});
    case DType::int32: return f(int32_t{});
    case DType::int64: return f(int64_t{});
    case DType::uint8: return f(uint8_t{});
    case DType::boolean: return f(bool{});
  }
  return f(float{});
}

// Calls f(float{}) or f(double{}) (float32 or float64), the types CPU kernels compute in.
template <class F>
void visit_float(DType t, F&& f) {
  if (t == DType::float64)
    f(double{});
  else
    f(float{});
}

}  // namespace kiln
