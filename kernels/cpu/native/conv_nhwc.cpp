// Native float32 convolution on channels-last activations (ConvDesc::nhwc), groups == 1.
//
// With pixels m = (n, p, q) of the output as rows, RSC = R*S*C and the weights permuted to
// wt[K, R, S, C]:
//   forward         dst[M, K]     = col[M, RSC] * wt^T            (+ bias per column)
//   backward-data   col[M, RSC]   = diff_dst[M, K] * wt;  col2im(col) -> diff_src
//   backward-wei    diff_wt[K, RSC] = diff_dst^T * col;  then permuted back to KCRS
// where row m of col holds, for every tap (r, s), the C channels of the input pixel that output
// pixel m reads through it (zeros in the padding): whole C-vectors, so im2col is a run of
// memcpy's. A 1x1, stride-1, unpadded convolution needs no col at all: src[N*H*W, C] is it, and
// each pass is one GEMM over the whole batch. Rows are done in chunks that bound the scratch;
// im2col, col2im and sgemm each use the whole team inside a chunk.
//   Test: ctest --test-dir build -R conv           Bench: build/bench/bench_conv --layout nhwc
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/conv.h"
#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/conv_nhwc_im2col.h"
#include "kernels/cpu/native/gemm.h"

namespace kiln::native {
namespace {

// Column scratch in floats (16 MiB): big enough that sgemm sees hundreds of rows per chunk.
constexpr int64_t kColBudget = int64_t(4) << 20;

struct NhwcGeom {
  int64_t M, RSC, chunk;
  bool direct;
  explicit NhwcGeom(const ConvDesc& d)
      : M(d.N * d.P * d.Q), RSC(d.R * d.S * d.C),
        direct(conv_is_pointwise_gemm(d)) {
    chunk = std::max<int64_t>(1, std::min<int64_t>(M, kColBudget / std::max<int64_t>(RSC, 1)));
  }
};





void fill_rows(float* dst, int64_t rows, int64_t cols, const float* row) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(dst + i * cols, row, sizeof(float) * size_t(cols));
  });
}

// dst[i, :] += row for every row i.
void add_rows(float* dst, int64_t rows, int64_t cols, const float* row) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* out = dst + i * cols;
#pragma omp simd
      for (int64_t k = 0; k < cols; ++k) out[k] += row[k];
    }
  });
}

}  // namespace

bool supports_conv_nhwc(const ConvDesc& d) { return d.dtype == DType::float32 && d.groups == 1; }

void conv2d_fwd_nhwc(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst,
                     bool accumulate) {
  const NhwcGeom g(d);
  if (g.M == 0) return;
  // With a residual in dst the GEMMs add onto it and the bias follows in a pass of its own.
  if (bias && !accumulate) fill_rows(dst, g.M, d.K, bias);
  const float beta = bias || accumulate ? 1.f : 0.f;
  if (accumulate && bias) {
    conv2d_fwd_nhwc(d, src, wei, nullptr, dst, true);
    add_rows(dst, g.M, d.K, bias);
    return;
  }
  if (g.direct) {  // dst[M, K] = src[M, C] * wei[K, C]^T
    sgemm(false, true, g.M, d.K, d.C, 1.f, src, d.C, wei, d.C, beta, dst, d.K);
    return;
  }
  std::vector<float> wt(size_t(d.K * g.RSC));
  permute_weights(d, wei, wt.data(), false);
  std::vector<float> col(size_t(g.chunk * g.RSC));
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    im2col(d, g.RSC, src, m0, m1, col.data());
    sgemm(false, true, m1 - m0, d.K, g.RSC, 1.f, col.data(), g.RSC, wt.data(), g.RSC, beta, dst + m0 * d.K, d.K);
  }
}

void conv2d_bwd_data_nhwc(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  const NhwcGeom g(d);
  if (g.direct) {  // diff_src[M, C] = diff_dst[M, K] * wei[K, C]
    sgemm(false, false, g.M, d.C, d.K, 1.f, diff_dst, d.K, wei, d.C, 0.f, diff_src, d.C);
    return;
  }
  const int64_t src_elems = d.src_elems();
  parallel_for(0, src_elems, 65536, [&](int64_t b, int64_t e) {
    std::memset(diff_src + b, 0, sizeof(float) * size_t(e - b));
  });
  if (g.M == 0) return;
  std::vector<float> wt(size_t(d.K * g.RSC));
  permute_weights(d, wei, wt.data(), false);
  std::vector<float> col(size_t(g.chunk * g.RSC));
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    sgemm(false, false, m1 - m0, g.RSC, d.K, 1.f, diff_dst + m0 * d.K, d.K, wt.data(), g.RSC, 0.f, col.data(), g.RSC);
    col2im(d, g.RSC, col.data(), m0, m1, diff_src);
  }
}

void conv2d_bwd_weights_nhwc(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei,
                             float* diff_bias) {
  const NhwcGeom g(d);
  if (diff_bias) {  // column sums of diff_dst[M, K]; each thread owns a range of columns
    const int64_t kgrain = std::max<int64_t>(16, d.K / std::max(1, num_threads()));
    parallel_for(0, d.K, kgrain, [&](int64_t k0, int64_t k1) {
      std::vector<double> acc(size_t(k1 - k0), 0.0);
      std::vector<float> part(size_t(k1 - k0), 0.f);
      for (int64_t m = 0; m < g.M; ++m) {
        const float* row = diff_dst + m * d.K;
        for (int64_t k = k0; k < k1; ++k) part[size_t(k - k0)] += row[k];
        if ((m & 255) == 255) {  // fold into double every 256 rows: N*P*Q terms of either sign
          for (int64_t k = k0; k < k1; ++k) acc[size_t(k - k0)] += part[size_t(k - k0)], part[size_t(k - k0)] = 0.f;
        }
      }
      for (int64_t k = k0; k < k1; ++k) diff_bias[k] = float(acc[size_t(k - k0)] + part[size_t(k - k0)]);
    });
  }
  if (!diff_wei) return;
  if (g.M == 0) {
    std::memset(diff_wei, 0, sizeof(float) * size_t(d.wei_elems()));
    return;
  }
  if (conv_direct_fwd_applies(d)) return conv2d_bwd_weights_direct(d, src, diff_dst, diff_wei);
  if (g.direct) {  // diff_wei[K, C] = diff_dst[M, K]^T * src[M, C]
    sgemm(true, false, d.K, d.C, g.M, 1.f, diff_dst, d.K, src, d.C, 0.f, diff_wei, d.C);
    return;
  }
  std::vector<float> dwt(size_t(d.K * g.RSC));
  std::vector<float> col(size_t(g.chunk * g.RSC));
  for (int64_t m0 = 0; m0 < g.M; m0 += g.chunk) {
    const int64_t m1 = std::min(g.M, m0 + g.chunk);
    im2col(d, g.RSC, src, m0, m1, col.data());
    sgemm(true, false, d.K, g.RSC, m1 - m0, 1.f, diff_dst + m0 * d.K, d.K, col.data(), g.RSC, m0 == 0 ? 0.f : 1.f,
          dwt.data(), g.RSC);
  }
  permute_weights(d, dwt.data(), diff_wei, true);
}

}  // namespace kiln::native
