// Native bfloat16 convolution, channels-last, groups == 1 (conv_bf16.h): conv_nhwc.cpp's float32
// scheme on the bfloat16 GEMM. With pixels m = (n, p, q) of the output as rows, RSC = R*S*C and
// the weights permuted to wt[K, R, S, C]:
//   forward         dst[M, K]       = round(col[M, RSC] * wt^T + bias [relu])
//   backward-data   colf[M, RSC]    = diff_dst[M, K] * wt (float32);  col2im -> float32 sums -> round
//   backward-wei    dwt[K, RSC]    += diff_dst^T * col (float32 over all chunks);  permute + round
// where row m of col holds, for every tap (r, s), the C channels of the input pixel that output
// pixel m reads through it (zeros in the padding). A 1x1, stride-1, unpadded convolution needs no
// col: each pass is one GEMM over the whole batch. Rows are done in chunks that bound the scratch.
//   ctest --test-dir build -R kernels.test_conv_bf16
#include "kernels/cpu/native/conv_bf16.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv_nhwc_im2col.h"
#include "kernels/cpu/native/gemm_bf16.h"
#include "kernels/cpu/native/thread_buffer.h"

namespace kiln::native {
namespace {

// Column scratch in elements per chunk (4 MiB of bfloat16 col, or 8 MiB of float32 col in
// backward-data): hundreds of GEMM rows per chunk.
constexpr int64_t kColBudget = int64_t(2) << 20;

struct Geom {
  int64_t M, RSC, chunk;
  bool direct;
  explicit Geom(const ConvDesc& d)
      : M(d.N * d.P * d.Q), RSC(d.R * d.S * d.C),
        direct(conv_is_pointwise_gemm(d)) {
    chunk = std::max<int64_t>(1, std::min<int64_t>(M, kColBudget / std::max<int64_t>(RSC, 1)));
  }
};

// Scratch kept by the calling thread for its next call (the col chunk, the permuted weights),
// one buffer per Slot: fresh pages each call (and a vector's zero fill) measured several percent
// of a layer.
template <class T, int Slot>
T* scratch(int64_t n) {
  thread_local ThreadBuffer<T> buf("conv2d (native bfloat16): scratch");
  return buf.get(size_t(std::max<int64_t>(n, 1)));
}





void fill_bf16(BFloat16* p, int64_t n) {
  parallel_for(0, n, 65536, [&](int64_t b, int64_t e) {
    std::memset(static_cast<void*>(p + b), 0, sizeof(BFloat16) * size_t(e - b));
  });
}

}  // namespace

bool supports_conv_bf16(const ConvDesc& d) { return d.dtype == DType::bfloat16 && d.nhwc && d.groups == 1; }

void conv2d_fwd_bf16(const ConvDesc& d, const void* src_v, const void* wei_v, const void* bias_v, void* dst_v) {
  KILN_CHECK(supports_conv_bf16(d), "conv2d_fwd (native bfloat16): unsupported ", d.str());
  const auto* src = static_cast<const BFloat16*>(src_v);
  const auto* wei = static_cast<const BFloat16*>(wei_v);
  auto* dst = static_cast<BFloat16*>(dst_v);
  const Geom g(d);
  if (g.M == 0 || d.K == 0) return;
  Bf16Epilogue epi;
  epi.col_bias = d.has_bias ? static_cast<const float*>(bias_v) : nullptr;
  epi.relu = d.relu;
  const float beta = d.sum ? 1.f : 0.f;  // the residual post-op: dst is read, added in float32
  if (g.direct)  // dst[M, K] = src[M, C] * wei[K, C]^T
    return bf16gemm_round(false, true, g.M, d.K, d.C, 1.f, src, d.C, wei, d.C, beta, dst, d.K, epi);
  BFloat16* wt = scratch<BFloat16, 0>(d.K * g.RSC);
  permute_weights(d, wei, wt, false);
  BFloat16* col = scratch<BFloat16, 1>(g.chunk * g.RSC);
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    im2col(d, g.RSC, src, m0, m1, col);
    bf16gemm_round(false, true, m1 - m0, d.K, g.RSC, 1.f, col, g.RSC, wt, g.RSC, beta, dst + m0 * d.K, d.K, epi);
  }
}

void conv2d_bwd_data_bf16(const ConvDesc& d, const void* diff_dst_v, const void* wei_v, void* diff_src_v) {
  KILN_CHECK(supports_conv_bf16(d), "conv2d_bwd_data (native bfloat16): unsupported ", d.str());
  const auto* diff_dst = static_cast<const BFloat16*>(diff_dst_v);
  const auto* wei = static_cast<const BFloat16*>(wei_v);
  auto* diff_src = static_cast<BFloat16*>(diff_src_v);
  const Geom g(d);
  if (g.direct)  // diff_src[M, C] = diff_dst[M, K] * wei[K, C]
    return bf16gemm_round(false, false, g.M, d.C, d.K, 1.f, diff_dst, d.K, wei, d.C, 0.f, diff_src, d.C);
  const int64_t src_elems = d.src_elems();
  if (g.M == 0 || d.K == 0) return fill_bf16(diff_src, src_elems);
  // Taps of neighbouring output pixels overlap (and chunk borders cut through them): the sums
  // stay in float32 until every chunk is in.
  std::vector<float> acc(static_cast<size_t>(src_elems));
  parallel_for(0, src_elems, 65536, [&](int64_t b, int64_t e) {
    std::memset(acc.data() + b, 0, sizeof(float) * size_t(e - b));
  });
  BFloat16* wt = scratch<BFloat16, 0>(d.K * g.RSC);
  permute_weights(d, wei, wt, false);
  float* col = scratch<float, 2>(g.chunk * g.RSC);
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    bf16gemm(false, false, m1 - m0, g.RSC, d.K, 1.f, diff_dst + m0 * d.K, d.K, wt, g.RSC, 0.f, col, g.RSC);
    col2im(d, g.RSC, col, m0, m1, acc.data());
  }
  parallel_for(0, src_elems, 65536,
               [&](int64_t b, int64_t e) { round_to_bf16(acc.data() + b, e - b, diff_src + b); });
}

void conv2d_bwd_weights_bf16(const ConvDesc& d, const void* src_v, const void* diff_dst_v, void* diff_wei_v,
                             void* diff_bias_v) {
  KILN_CHECK(supports_conv_bf16(d), "conv2d_bwd_weights (native bfloat16): unsupported ", d.str());
  const auto* src = static_cast<const BFloat16*>(src_v);
  const auto* diff_dst = static_cast<const BFloat16*>(diff_dst_v);
  auto* diff_wei = static_cast<BFloat16*>(diff_wei_v);
  auto* diff_bias = static_cast<float*>(diff_bias_v);
  const Geom g(d);
  if (diff_bias) {  // column sums of diff_dst[M, K] (float32, ConvDesc's contract); threads own columns
    const int64_t kgrain = std::max<int64_t>(16, d.K / std::max(1, num_threads()));
    parallel_for(0, d.K, kgrain, [&](int64_t k0, int64_t k1) {
      std::vector<double> acc(size_t(k1 - k0), 0.0);
      std::vector<float> part(size_t(k1 - k0), 0.f);
      for (int64_t m = 0; m < g.M; ++m) {
        const BFloat16* row = diff_dst + m * d.K;
        for (int64_t k = k0; k < k1; ++k) part[size_t(k - k0)] += float(row[k]);
        if ((m & 255) == 255) {  // fold into double every 256 rows: N*P*Q terms of either sign
          for (int64_t k = k0; k < k1; ++k) acc[size_t(k - k0)] += part[size_t(k - k0)], part[size_t(k - k0)] = 0.f;
        }
      }
      for (int64_t k = k0; k < k1; ++k) diff_bias[k] = float(acc[size_t(k - k0)] + part[size_t(k - k0)]);
    });
  }
  if (!diff_wei) return;
  if (g.M == 0) return fill_bf16(diff_wei, d.wei_elems());
  if (g.direct)  // diff_wei[K, C] = diff_dst[M, K]^T * src[M, C]
    return bf16gemm_round(true, false, d.K, d.C, g.M, 1.f, diff_dst, d.K, src, d.C, 0.f, diff_wei, d.C);
  float* dwt = scratch<float, 3>(d.K * g.RSC);
  BFloat16* col = scratch<BFloat16, 1>(g.chunk * g.RSC);
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    im2col(d, g.RSC, src, m0, m1, col);
    bf16gemm(true, false, d.K, g.RSC, m1 - m0, 1.f, diff_dst + m0 * d.K, d.K, col, g.RSC, m0 == 0 ? 0.f : 1.f, dwt,
             g.RSC);
  }
  permute_weights(d, dwt, diff_wei, true);
}

}  // namespace kiln::native
