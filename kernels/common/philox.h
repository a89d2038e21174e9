// Philox-4x32-10 (Salmon et al., SC'11): a counter-based generator. Element i of a random fill
// uses counter (offset + i / 4) and lane i % 4, so the numbers do not depend on the thread
// count, the device or the order of evaluation. Host+device so CUDA kernels draw the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace kiln {

struct Philox4x32 {
  uint32_t v[4];
};

KILN_HOST_DEVICE inline Philox4x32 philox4x32(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = uint32_t(p1);
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = uint32_t(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
KILN_HOST_DEVICE inline float uint_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

// Uniform in [0,1) for element i of the stream (seed, offset).
KILN_HOST_DEVICE inline float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4x32 r = philox4x32(seed, offset + i / 4);
  return uint_to_unit_float(r.v[i % 4]);
}

// Standard normal for element i: Box-Muller on lanes (0,1) of counter offset + i / 2; even i
// takes the cosine, odd i the sine.
// The host and a CUDA device must give the same bits (tests/gpu/test_gpu_ops.cpp, the oracle):
//  - u1 = (k + 1) * 2^-24 for k in [0, 2^24): exact in float, in (0, 1]. The scale is written as
//    2^-24 itself: "1.0f / 16777217.0f" (2^24 + 1 is no float) was folded to 2^-24 by the host
//    compiler and to 2^-24 (1 - 2^-23) by nvcc, two ulps of u1 apart on the device.
//  - log, sqrt and sin/cos run in double and the product is rounded to float once. The host's
//    libm and CUDA's differ by an ulp or two in float (logf, sinf, cosf: CUDA documents 1 to 2
//    ulps), which the final rounding kept; in double their few-ulp differences change the float
//    result only when the exact value lies within a few double ulps of a float rounding boundary
//    (about one draw in 10^8). No multiply feeds an add here, so no FMA contraction differs.
KILN_HOST_DEVICE inline float philox_normal(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4x32 r = philox4x32(seed, offset + i / 2);
  uint32_t a = r.v[0], b = r.v[1];
  const float u1 = (float(a >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = uint_to_unit_float(b);
  const float th = 6.2831853071795864f * u2;  // one float rounding, the same on both sides
  const double rad = sqrt(-2.0 * log(double(u1)));
  return float((i % 2 == 0) ? rad * cos(double(th)) : rad * sin(double(th)));
}

}  // namespace kiln
