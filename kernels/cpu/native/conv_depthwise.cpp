// Direct depthwise convolution (groups == C, K = C * multiplier, weights [K, 1, R, S]): forward,
// backward-data and backward-weights (+ bias) for NCHW and NHWC, float32. im2col would copy
// R*S times the input to feed GEMMs with one row of weights per group (M = multiplier, K = R*S):
// the GEMM cannot block such a product, and the copy costs more than the arithmetic. Here every
// output is summed straight from the input.
//   NCHW: one (image, channel) plane per task; each tap (r, s) is a multiply-add over a row
//         segment (contiguous when stride_w == 1, which the compiler vectorises).
//   NHWC: one (image, row) per task, vectorised over the channels with the weights transposed
//         to [R*S, K] once per call; backward-data gathers from the outputs that read each input
//         pixel (no races, no atomics).
// Backward-weights (and the bias gradient) sums over the batch in a fixed order: NCHW by output
// channel; NHWC in kParts fixed slices of the (image, row) pairs reduced in slice order. Results
// do not depend on the thread count.
//   Test: ctest --test-dir build -R "test_conv_depthwise|conv"    Bench: build/bench/bench_conv
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"

namespace kiln::native {
namespace {

// Output positions q whose input position q*stride - pad + offset lies in [0, in): [lo, hi).
void valid(int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t offset, int64_t& lo, int64_t& hi) {
  auto first_at_least = [&](int64_t bound) { return bound <= 0 ? 0 : (bound + stride - 1) / stride; };
  lo = std::min(out, first_at_least(pad - offset));
  hi = std::max(lo, std::min(out, first_at_least(in + pad - offset)));
}

// Weights [K, R*S] -> [R*S, K] (the NHWC loops run over channels).
std::vector<float> transpose_weights(const ConvDesc& d, const float* wei) {
  const int64_t RS = d.R * d.S;
  std::vector<float> t(static_cast<size_t>(RS * d.K));
  for (int64_t k = 0; k < d.K; ++k)
    for (int64_t i = 0; i < RS; ++i) t[size_t(i * d.K + k)] = wei[k * RS + i];
  return t;
}

constexpr int64_t kParts = 16;  // fixed slices of the NHWC weight-gradient reduction

// --- NCHW ---

// The valid output ranges of every tap, computed once per call.
struct Taps {
  std::vector<int64_t> p0, p1, q0, q1;  // per r (p) and per s (q)
  explicit Taps(const ConvDesc& d) : p0(size_t(d.R)), p1(size_t(d.R)), q0(size_t(d.S)), q1(size_t(d.S)) {
    for (int64_t r = 0; r < d.R; ++r) valid(d.H, d.P, d.stride_h, d.pad_h, r * d.dilation_h, p0[size_t(r)], p1[size_t(r)]);
    for (int64_t s = 0; s < d.S; ++s) valid(d.W, d.Q, d.stride_w, d.pad_w, s * d.dilation_w, q0[size_t(s)], q1[size_t(s)]);
  }
};

void fwd_nchw(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst) {
  const int64_t M = d.K / d.C, HW = d.H * d.W, PQ = d.P * d.Q, RS = d.R * d.S;
  const Taps tp(d);
  parallel_for(0, d.N * d.K, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, PQ * RS)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / d.K, k = t % d.K, c = k / M;
      const float* s = src + (n * d.C + c) * HW;
      const float* w = wei + k * RS;
      float* o = dst + t * PQ;
      // Row by row, all taps on a row while it is in L1 (a whole plane is not).
      for (int64_t p = 0; p < d.P; ++p) {
        float* orow = o + p * d.Q;
        std::fill(orow, orow + d.Q, bias ? bias[k] : 0.f);
        for (int64_t r = 0; r < d.R; ++r) {
          if (p < tp.p0[size_t(r)] || p >= tp.p1[size_t(r)]) continue;
          const float* srow0 = s + (p * d.stride_h - d.pad_h + r * d.dilation_h) * d.W;
          for (int64_t sx = 0; sx < d.S; ++sx) {
            const int64_t q0 = tp.q0[size_t(sx)], q1 = tp.q1[size_t(sx)];
            const float wv = w[r * d.S + sx];
            const float* srow = srow0 + sx * d.dilation_w - d.pad_w;
            if (d.stride_w == 1) {
#pragma omp simd
              for (int64_t q = q0; q < q1; ++q) orow[q] += wv * srow[q];
            } else {
              for (int64_t q = q0; q < q1; ++q) orow[q] += wv * srow[q * d.stride_w];
            }
          }
        }
      }
    }
  });
}

void bwd_data_nchw(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  const int64_t M = d.K / d.C, HW = d.H * d.W, PQ = d.P * d.Q, RS = d.R * d.S;
  const Taps tp(d);
  // One input plane per task: every output channel of its group scatters into it alone, output
  // row by output row (the R input rows it touches stay in L1).
  parallel_for(0, d.N * d.C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, M * PQ * RS)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / d.C, c = t % d.C;
      float* ds = diff_src + t * HW;
      std::fill(ds, ds + HW, 0.f);
      for (int64_t m = 0; m < M; ++m) {
        const int64_t k = c * M + m;
        const float* dd = diff_dst + (n * d.K + k) * PQ;
        const float* w = wei + k * RS;
        for (int64_t p = 0; p < d.P; ++p) {
          const float* drow = dd + p * d.Q;
          for (int64_t r = 0; r < d.R; ++r) {
            if (p < tp.p0[size_t(r)] || p >= tp.p1[size_t(r)]) continue;
            float* srow0 = ds + (p * d.stride_h - d.pad_h + r * d.dilation_h) * d.W;
            for (int64_t sx = 0; sx < d.S; ++sx) {
              const int64_t q0 = tp.q0[size_t(sx)], q1 = tp.q1[size_t(sx)];
              const float wv = w[r * d.S + sx];
              float* srow = srow0 + sx * d.dilation_w - d.pad_w;
              if (d.stride_w == 1) {
#pragma omp simd
                for (int64_t q = q0; q < q1; ++q) srow[q] += wv * drow[q];
              } else {
                for (int64_t q = q0; q < q1; ++q) srow[q * d.stride_w] += wv * drow[q];
              }
            }
          }
        }
      }
    }
  });
}

void bwd_weights_nchw(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei, float* diff_bias) {
  const int64_t M = d.K / d.C, HW = d.H * d.W, PQ = d.P * d.Q, RS = d.R * d.S;
  const Taps tp(d);
  // One output channel per task, images in order: deterministic for any thread count. Per
  // image, every tap's sum runs over the rows in one sweep (float), added into double across
  // images (N*P*Q terms of either sign).
  parallel_for(0, d.K, 1, [&](int64_t b, int64_t e) {
    std::vector<double> acc(static_cast<size_t>(RS));
    std::vector<float> part(static_cast<size_t>(RS));
    for (int64_t k = b; k < e; ++k) {
      const int64_t c = k / M;
      if (diff_bias) {
        double a = 0;
        for (int64_t n = 0; n < d.N; ++n) {
          const float* dd = diff_dst + (n * d.K + k) * PQ;
          float t = 0;
#pragma omp simd reduction(+ : t)
          for (int64_t i = 0; i < PQ; ++i) t += dd[i];
          a += t;
        }
        diff_bias[k] = float(a);
      }
      if (!diff_wei) continue;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < d.N; ++n) {
        const float* s = src + (n * d.C + c) * HW;
        const float* dd = diff_dst + (n * d.K + k) * PQ;
        std::fill(part.begin(), part.end(), 0.f);
        for (int64_t p = 0; p < d.P; ++p) {
          const float* drow = dd + p * d.Q;
          for (int64_t r = 0; r < d.R; ++r) {
            if (p < tp.p0[size_t(r)] || p >= tp.p1[size_t(r)]) continue;
            const float* srow0 = s + (p * d.stride_h - d.pad_h + r * d.dilation_h) * d.W;
            for (int64_t sx = 0; sx < d.S; ++sx) {
              const int64_t q0 = tp.q0[size_t(sx)], q1 = tp.q1[size_t(sx)];
              const float* srow = srow0 + sx * d.dilation_w - d.pad_w;
              float t = 0;
              if (d.stride_w == 1) {
#pragma omp simd reduction(+ : t)
                for (int64_t q = q0; q < q1; ++q) t += drow[q] * srow[q];
              } else {
                for (int64_t q = q0; q < q1; ++q) t += drow[q] * srow[q * d.stride_w];
              }
              part[size_t(r * d.S + sx)] += t;
            }
          }
        }
        for (int64_t i = 0; i < RS; ++i) acc[size_t(i)] += part[size_t(i)];
      }
      for (int64_t i = 0; i < RS; ++i) diff_wei[k * RS + i] = float(acc[size_t(i)]);
    }
  });
}

// --- NHWC ---

void fwd_nhwc(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst) {
  const int64_t M = d.K / d.C, K = d.K, C = d.C;
  const std::vector<float> wt = transpose_weights(d, wei);
  parallel_for(0, d.N * d.P, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.Q * K * d.R * d.S)),
               [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / d.P, p = t % d.P;
      float* orow = dst + t * d.Q * K;
      for (int64_t q = 0; q < d.Q; ++q) {
        float* o = orow + q * K;
        if (bias) std::memcpy(o, bias, sizeof(float) * size_t(K));
        else std::fill(o, o + K, 0.f);
        for (int64_t r = 0; r < d.R; ++r) {
          const int64_t h = p * d.stride_h - d.pad_h + r * d.dilation_h;
          if (h < 0 || h >= d.H) continue;
          for (int64_t sx = 0; sx < d.S; ++sx) {
            const int64_t w = q * d.stride_w - d.pad_w + sx * d.dilation_w;
            if (w < 0 || w >= d.W) continue;
            const float* s = src + ((n * d.H + h) * d.W + w) * C;
            const float* wv = wt.data() + (r * d.S + sx) * K;
            if (M == 1) {
#pragma omp simd
              for (int64_t k = 0; k < K; ++k) o[k] += wv[k] * s[k];
            } else {
              for (int64_t c = 0; c < C; ++c)
                for (int64_t m = 0; m < M; ++m) o[c * M + m] += wv[c * M + m] * s[c];
            }
          }
        }
      }
    }
  });
}

void bwd_data_nhwc(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  const int64_t M = d.K / d.C, K = d.K, C = d.C;
  const std::vector<float> wt = transpose_weights(d, wei);
  // Gather: input pixel (h, w) receives from outputs p with p*stride_h - pad_h + r*dilation_h == h.
  parallel_for(0, d.N * d.H, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.W * K * d.R * d.S)),
               [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / d.H, h = t % d.H;
      float* srow = diff_src + t * d.W * C;
      for (int64_t w = 0; w < d.W; ++w) {
        float* ds = srow + w * C;
        std::fill(ds, ds + C, 0.f);
        for (int64_t r = 0; r < d.R; ++r) {
          const int64_t ph = h + d.pad_h - r * d.dilation_h;
          if (ph < 0 || ph % d.stride_h) continue;
          const int64_t p = ph / d.stride_h;
          if (p >= d.P) continue;
          for (int64_t sx = 0; sx < d.S; ++sx) {
            const int64_t qw = w + d.pad_w - sx * d.dilation_w;
            if (qw < 0 || qw % d.stride_w) continue;
            const int64_t q = qw / d.stride_w;
            if (q >= d.Q) continue;
            const float* dd = diff_dst + ((n * d.P + p) * d.Q + q) * K;
            const float* wv = wt.data() + (r * d.S + sx) * K;
            if (M == 1) {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) ds[c] += wv[c] * dd[c];
            } else {
              for (int64_t c = 0; c < C; ++c) {
                float a = 0;
                for (int64_t m = 0; m < M; ++m) a += wv[c * M + m] * dd[c * M + m];
                ds[c] += a;
              }
            }
          }
        }
      }
    }
  });
}

void bwd_weights_nhwc(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei, float* diff_bias) {
  const int64_t M = d.K / d.C, K = d.K, C = d.C, RS = d.R * d.S;
  const int64_t rows = d.N * d.P, parts = std::max<int64_t>(1, std::min(kParts, rows));
  // Per slice: [R*S + 1, K] (the weight gradient transposed, then the bias gradient).
  std::vector<float> partial(static_cast<size_t>(parts * (RS + 1) * K), 0.f);
  parallel_for(0, parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t part = b; part < e; ++part) {
      float* acc = partial.data() + part * (RS + 1) * K;
      for (int64_t t = part * rows / parts; t < (part + 1) * rows / parts; ++t) {
        const int64_t n = t / d.P, p = t % d.P;
        for (int64_t q = 0; q < d.Q; ++q) {
          const float* dd = diff_dst + (t * d.Q + q) * K;
          float* ab = acc + RS * K;
#pragma omp simd
          for (int64_t k = 0; k < K; ++k) ab[k] += dd[k];
          if (!diff_wei) continue;
          for (int64_t r = 0; r < d.R; ++r) {
            const int64_t h = p * d.stride_h - d.pad_h + r * d.dilation_h;
            if (h < 0 || h >= d.H) continue;
            for (int64_t sx = 0; sx < d.S; ++sx) {
              const int64_t w = q * d.stride_w - d.pad_w + sx * d.dilation_w;
              if (w < 0 || w >= d.W) continue;
              const float* s = src + ((n * d.H + h) * d.W + w) * C;
              float* a = acc + (r * d.S + sx) * K;
              if (M == 1) {
#pragma omp simd
                for (int64_t k = 0; k < K; ++k) a[k] += dd[k] * s[k];
              } else {
                for (int64_t c = 0; c < C; ++c)
                  for (int64_t m = 0; m < M; ++m) a[c * M + m] += dd[c * M + m] * s[c];
              }
            }
          }
        }
      }
    }
  });
  // Slices added in order: the same bits for any thread count.
  for (int64_t part = 1; part < parts; ++part) {
    const float* src_p = partial.data() + part * (RS + 1) * K;
    for (int64_t i = 0; i < (RS + 1) * K; ++i) partial[size_t(i)] += src_p[i];
  }
  if (diff_wei)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < RS; ++i) diff_wei[k * RS + i] = partial[size_t(i * K + k)];
  if (diff_bias) std::memcpy(diff_bias, partial.data() + RS * K, sizeof(float) * size_t(K));
}

}  // namespace

bool is_depthwise(const ConvDesc& d) {
  // KILN_CONV_DEPTHWISE=0 sends depthwise layers down the im2col path (to compare the two).
  static const bool enabled = [] {
    const char* e = std::getenv("KILN_CONV_DEPTHWISE");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return enabled && d.dtype == DType::float32 && d.groups > 1 && d.groups == d.C && d.K % d.C == 0;
}

void conv2d_fwd_depthwise(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst) {
  KILN_CHECK(is_depthwise(d), "conv2d_fwd (native depthwise): not depthwise: ", d.str());
  if (d.N * d.K * d.P * d.Q == 0) return;
  if (d.nhwc) fwd_nhwc(d, src, wei, bias, dst);
  else fwd_nchw(d, src, wei, bias, dst);
}

void conv2d_bwd_data_depthwise(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  KILN_CHECK(is_depthwise(d), "conv2d_bwd_data (native depthwise): not depthwise: ", d.str());
  if (d.N * d.C * d.H * d.W == 0) return;
  if (d.nhwc) bwd_data_nhwc(d, diff_dst, wei, diff_src);
  else bwd_data_nchw(d, diff_dst, wei, diff_src);
}

void conv2d_bwd_weights_depthwise(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei,
                                  float* diff_bias) {
  KILN_CHECK(is_depthwise(d), "conv2d_bwd_weights (native depthwise): not depthwise: ", d.str());
  if (!diff_wei && !diff_bias) return;
  if (d.nhwc) bwd_weights_nhwc(d, src, diff_dst, diff_wei, diff_bias);
  else bwd_weights_nchw(d, src, diff_dst, diff_wei, diff_bias);
}

}  // namespace kiln::native
