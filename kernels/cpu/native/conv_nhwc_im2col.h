// Internal to the native channels-last im2col convolutions (conv_nhwc.cpp in float32,
// conv_bf16.cpp in bfloat16) and the direct one (conv_direct.cpp): the pieces they share. With
// pixels m = (n, p, q) of the output as rows and RSC = R*S*C, row m of col holds, for every tap
// (r, s), the C channels of the input pixel that output pixel m reads through it (zeros in the
// padding); the weights are permuted to wt[K, R, S, C] to match.
//   Test: ctest --test-dir build -R "test_conv"
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/conv.h"
#include "kernels/common/parallel.h"

namespace kiln::native {

// A 1x1, stride-1, unpadded convolution: src [N*H*W, C] already is the column matrix, and each
// pass is one GEMM over the whole batch.
inline bool conv_is_pointwise_gemm(const ConvDesc& d) {
  return d.R == 1 && d.S == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0 &&
         d.P == d.H && d.Q == d.W;
}

// wei [K, C, R, S] -> wt [K, R, S, C] (and back with `inverse`); To may differ from From (float32
// sums rounded into bfloat16, say).
template <class From, class To>
void permute_weights(const ConvDesc& d, const From* from, To* to, bool inverse) {
  parallel_for(0, d.K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t c = 0; c < d.C; ++c)
        for (int64_t r = 0; r < d.R; ++r)
          for (int64_t s = 0; s < d.S; ++s) {
            const int64_t kcrs = ((k * d.C + c) * d.R + r) * d.S + s, krsc = ((k * d.R + r) * d.S + s) * d.C + c;
            if (inverse) to[kcrs] = To(from[krsc]);
            else to[krsc] = To(from[kcrs]);
          }
  });
}

// Input pixel read by output pixel m through tap (r, s), or -1 in the padding.
inline int64_t tap_pixel(const ConvDesc& d, int64_t m, int64_t r, int64_t s) {
  const int64_t q = m % d.Q, p = (m / d.Q) % d.P, n = m / (d.P * d.Q);
  const int64_t ih = p * d.stride_h - d.pad_h + r * d.dilation_h, iw = q * d.stride_w - d.pad_w + s * d.dilation_w;
  if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) return -1;
  return (n * d.H + ih) * d.W + iw;
}

// Rows [m0, m1) of col [.., RSC] from src [N*H*W, C]; the whole team, about 16 KiB per chunk.
template <class T>
void im2col(const ConvDesc& d, int64_t RSC, const T* src, int64_t m0, int64_t m1, T* col) {
  const int64_t grain = std::max<int64_t>(1, int64_t(16384 / sizeof(T)) / std::max<int64_t>(RSC, 1));
  parallel_for(m0, m1, grain, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      T* row = col + (m - m0) * RSC;
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) {
          T* out = row + (r * d.S + s) * d.C;
          const int64_t px = tap_pixel(d, m, r, s);
          if (px < 0) std::memset(static_cast<void*>(out), 0, sizeof(T) * size_t(d.C));
          else std::memcpy(static_cast<void*>(out), src + px * d.C, sizeof(T) * size_t(d.C));
        }
    }
  });
}

// acc [N*H*W, C] += col2im(col) for rows [m0, m1), float32. Threads own channel ranges, so no two
// write the same element, and each element's sum runs in row order: bits independent of the
// thread count.
inline void col2im(const ConvDesc& d, int64_t RSC, const float* col, int64_t m0, int64_t m1, float* acc) {
  const int64_t cgrain = std::max<int64_t>(16, d.C / std::max(1, num_threads()));
  parallel_for(0, d.C, cgrain, [&](int64_t c0, int64_t c1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* row = col + (m - m0) * RSC;
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) {
          const int64_t px = tap_pixel(d, m, r, s);
          if (px < 0) continue;
          const float* in = row + (r * d.S + s) * d.C;
          float* out = acc + px * d.C;
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c) out[c] += in[c];
        }
    }
  });
}

}  // namespace kiln::native
