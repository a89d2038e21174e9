// Storage types for float16 (IEEE binary16) and bfloat16. kiln computes in float32 and uses these
// only to store and convert; conversions round to nearest even, as hardware converters do.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.h"

namespace kiln {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  KILN_HOST_DEVICE BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a numeric type
  KILN_HOST_DEVICE operator float() const {                    // NOLINT
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  KILN_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  KILN_HOST_DEVICE Half(float f) : bits(from_float(f)) {}  // NOLINT
  KILN_HOST_DEVICE operator float() const { return to_float(bits); }  // NOLINT

  KILN_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) return uint16_t(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to inf after rounding
    if (absx < 0x38800000u) {                                   // subnormal or zero in half
      if (absx < 0x33000000u) return uint16_t(sign);             // below half of the smallest subnormal
      uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
      int shift = 126 - int(absx >> 23);                         // 14..24
      uint32_t half_mant = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
      return uint16_t(sign | half_mant);
    }
    uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);   // round to nearest even on the 13 dropped bits
    return uint16_t(sign | (r >> 13));
  }
  KILN_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
      if (mant == 0) {
        u = sign;
      } else {  // subnormal: normalise
        int e = -1;
        do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
        u = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else if (exp == 31) {
      u = sign | 0x7f800000u | (mant << 13);
    } else {
      u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// The type 16-bit storage computes in (float); other types compute in themselves. Shared by the
// kernels that keep half data and accumulate wider (batch norm, pooling).
template <class T>
struct AccType {
  using type = T;
};
template <>
struct AccType<BFloat16> {
  using type = float;
};
template <>
struct AccType<Half> {
  using type = float;
};

}  // namespace kiln
