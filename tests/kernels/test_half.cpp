// kiln::Half (kernels/common/half.h), the float16 storage type of the CPU kernels and the emulator:
// float -> half rounds to nearest even, subnormals included, and every half survives the round trip.
//   ctest --test-dir build -R kernels.test_half
#include "tests/support/testing.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/half.h"

using kiln::Half;

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST_CASE("float16: subnormals round to nearest even instead of flushing to zero") {
  const float tiny = std::ldexp(1.f, -24);  // the smallest subnormal half
  CHECK(Half::from_float(tiny) == 0x0001);
  CHECK(Half::from_float(-tiny) == 0x8001);
  CHECK(Half::from_float(0.5f * tiny) == 0x0000);   // halfway to 0: even
  CHECK(Half::from_float(0.75f * tiny) == 0x0001);  // past halfway
  CHECK(Half::from_float(1.5f * tiny) == 0x0002);   // halfway between 1 and 2: even
  CHECK(Half::from_float(2.5f * tiny) == 0x0002);   // halfway between 2 and 3: even
  CHECK(Half::from_float(std::ldexp(1.f, -15)) == 0x0200);
  CHECK(Half::from_float(1023 * tiny) == 0x03ff);     // the largest subnormal
  CHECK(Half::from_float(std::ldexp(1.f, -14)) == 0x0400);  // the smallest normal
  CHECK(Half::from_float(std::ldexp(1.f, -26)) == 0x0000);
  CHECK(Half::from_float(65504.f) == 0x7bff);
  CHECK(Half::from_float(65520.f) == 0x7c00);  // rounds up to infinity
  CHECK(Half::from_float(from_bits(0x7f800000u)) == 0x7c00);
  CHECK((Half::from_float(std::nanf("")) & 0x7e00) == 0x7e00);
}

TEST_CASE("float16: every half converts to float and back unchanged") {
  int64_t bad = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = Half::to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    if (Half::from_float(f) != h) ++bad;
  }
  CHECK(bad == 0);
}

#ifdef __FLT16_MAX__
TEST_CASE("float16: from_float matches the compiler's _Float16 conversion across the float range") {
  int64_t bad = 0, n = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {  // every sign, exponent and rounding case
    const float f = from_bits(uint32_t(u));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ++n;
    if (Half::from_float(f) != want) ++bad;
  }
  CHECK(n > 1000000);
  CHECK(bad == 0);
}
#endif
