// Native float32 convolution: im2col + sgemm (see conv.h for the threading scheme).
//
// Per image n and group g, with Cg = C/groups, Kg = K/groups, CRS = Cg*R*S, PQ = P*Q:
//   forward         dst_g[Kg, PQ]   = wei_g[Kg, CRS] * col[CRS, PQ]          (+ bias per row)
//   backward-data   col[CRS, PQ]    = wei_g^T * diff_dst_g[Kg, PQ];  col2im(col) -> diff_src_g
//   backward-wei    diff_wei_g     += diff_dst_g[Kg, PQ] * col^T
// where col = im2col(src_g): row (c, r, s), column (p, q) holds the input tap read by output
// (p, q) through kernel position (r, s) of channel c, zero in the padding. Large images are done
// in chunks of output rows (columns [p0*Q, p1*Q) of col), which bounds the scratch per thread.
#include "kernels/cpu/native/conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv_bf16.h"
#include "kernels/cpu/native/conv_nhwc_im2col.h"
#include "kernels/cpu/native/gemm.h"

namespace kiln::native {
namespace {

// Column scratch per thread, in floats (4 MiB): a 224x224 layer would otherwise need a 100+ MiB
// column matrix per thread, and a chunk this size is still warm when sgemm reads it.
constexpr int64_t kColBudget = int64_t(1) << 20;

// One allocation per call, carved into 64-byte aligned slices (one per thread), so threads never
// share a cache line of scratch.
class Scratch {
 public:
  Scratch(int64_t slices, int64_t elems_per_slice) {
    stride_ = (std::max<int64_t>(elems_per_slice, 1) + 15) / 16 * 16;  // 16 floats = 64 bytes
    const size_t bytes = size_t(stride_ * std::max<int64_t>(slices, 1)) * sizeof(float);
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    KILN_CHECK(data_, "conv2d (native): out of memory for ", bytes, " bytes of scratch");
  }
  ~Scratch() { std::free(data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* slice(int64_t i) const { return data_ + i * stride_; }

 private:
  float* data_ = nullptr;
  int64_t stride_ = 0;
};

struct Geom {
  int64_t G, Cg, Kg, HW, PQ, CRS;
  bool direct;        // 1x1, stride 1, no padding: src_g [Cg, H*W] already is the column matrix
  int64_t chunk_rows;  // output rows per im2col chunk (P split evenly)
  explicit Geom(const ConvDesc& d)
      : G(d.groups), Cg(d.C / d.groups), Kg(d.K / d.groups), HW(d.H * d.W), PQ(d.P * d.Q),
        CRS(d.C / d.groups * d.R * d.S),
        direct(conv_is_pointwise_gemm(d)) {
    const int64_t chunks = std::clamp<int64_t>((CRS * PQ + kColBudget - 1) / kColBudget, 1, std::max<int64_t>(d.P, 1));
    chunk_rows = (d.P + chunks - 1) / chunks;
  }
  int64_t col_elems(const ConvDesc& d) const { return direct ? 0 : CRS * chunk_rows * d.Q; }
};

// How many slices to split `items` independent work items into. Splitting pays when every
// thread gets about the same number of items; otherwise one item at a time with a parallel
// sgemm inside balances better (batch 1, say).
int64_t num_parts(int64_t items) {
  if (in_parallel_region()) return 1;  // called from a parallel region: everything runs serially
  const int64_t nt = num_threads();
  if (nt <= 1 || items < 2) return 1;
  if (items % nt == 0 || items >= 2 * nt) return std::min(items, nt);
  return 1;
}

// Items [part*items/parts, (part+1)*items/parts) belong to `part`; fn(part, item) runs them.
// With parts > 1 each part runs on its own thread inside a parallel region, where sgemm and the
// parallel_for of im2col/col2im run single-threaded (gemm.h's and parallel.h's contract): no
// nested parallelism.
template <class F>
void run_parts(int64_t items, int64_t parts, const F& fn) {
  parallel_for(0, parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t part = b; part < e; ++part)
      for (int64_t i = part * items / parts; i < (part + 1) * items / parts; ++i) fn(part, i);
  });
}

// Output columns q whose input column q*stride - pad + offset lies in [0, W): [lo, hi).
void valid_range(int64_t W, int64_t Q, int64_t stride, int64_t pad, int64_t offset, int64_t& lo, int64_t& hi) {
  auto first_at_least = [&](int64_t bound) {  // smallest q >= 0 with q*stride >= bound
    return bound <= 0 ? 0 : (bound + stride - 1) / stride;
  };
  lo = std::min(Q, first_at_least(pad - offset));
  hi = std::max(lo, std::min(Q, first_at_least(W + pad - offset)));
}

int64_t channel_grain(const ConvDesc& d, int64_t rows) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, d.R * d.S * rows * d.Q));
}

// src: [Cg, H, W] of one image and group; col: [Cg*R*S, (p1-p0)*Q] for output rows [p0, p1).
void im2col(const ConvDesc& d, const Geom& gm, const float* src, int64_t p0, int64_t p1, float* col) {
  const int64_t ncol = (p1 - p0) * d.Q;
  parallel_for(0, gm.Cg, channel_grain(d, p1 - p0), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) {
          float* row = col + ((c * d.R + r) * d.S + s) * ncol;
          const int64_t off_w = s * d.dilation_w;
          int64_t lo, hi;
          valid_range(d.W, d.Q, d.stride_w, d.pad_w, off_w, lo, hi);
          for (int64_t p = p0; p < p1; ++p) {
            float* out = row + (p - p0) * d.Q;
            const int64_t ih = p * d.stride_h - d.pad_h + r * d.dilation_h;
            if (ih < 0 || ih >= d.H) {
              std::fill(out, out + d.Q, 0.f);
              continue;
            }
            std::fill(out, out + lo, 0.f);
            std::fill(out + hi, out + d.Q, 0.f);
            const float* in = src + (c * d.H + ih) * d.W + lo * d.stride_w - d.pad_w + off_w;
            if (d.stride_w == 1) {
              std::memcpy(out + lo, in, sizeof(float) * size_t(hi - lo));
            } else {
              const int64_t sw = d.stride_w;
              for (int64_t q = lo; q < hi; ++q) out[q] = in[(q - lo) * sw];
            }
          }
        }
  });
}

// Adds the columns of output rows [p0, p1) back onto their input taps in diff_src [Cg, H, W].
// Each channel is owned by one thread and its taps are added in a fixed order (deterministic).
void col2im(const ConvDesc& d, const Geom& gm, const float* col, int64_t p0, int64_t p1, float* diff_src) {
  const int64_t ncol = (p1 - p0) * d.Q;
  parallel_for(0, gm.Cg, channel_grain(d, p1 - p0), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) {
          const float* row = col + ((c * d.R + r) * d.S + s) * ncol;
          const int64_t off_w = s * d.dilation_w;
          int64_t lo, hi;
          valid_range(d.W, d.Q, d.stride_w, d.pad_w, off_w, lo, hi);
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t ih = p * d.stride_h - d.pad_h + r * d.dilation_h;
            if (ih < 0 || ih >= d.H) continue;
            const float* in = row + (p - p0) * d.Q;
            float* out = diff_src + (c * d.H + ih) * d.W + lo * d.stride_w - d.pad_w + off_w;
            if (d.stride_w == 1) {
#pragma omp simd
              for (int64_t q = lo; q < hi; ++q) out[q - lo] += in[q];
            } else {
              const int64_t sw = d.stride_w;
              for (int64_t q = lo; q < hi; ++q) out[(q - lo) * sw] += in[q];
            }
          }
        }
  });
}

void zero(float* p, int64_t n) {
  parallel_for(0, n, 65536, [&](int64_t b, int64_t e) { std::memset(p + b, 0, sizeof(float) * size_t(e - b)); });
}

}  // namespace

bool supports_conv(const ConvDesc& d) {
  if (d.dtype == DType::bfloat16) return supports_conv_bf16(d);  // the residual post-op included
  // The residual post-op (d.sum) on the channels-last paths, which read dst before they write it.
  if (d.sum && !(d.nhwc && supports_conv_nhwc(d))) return false;
  return d.dtype == DType::float32 && (!d.nhwc || supports_conv_nhwc(d) || is_depthwise(d));
}

static void conv2d_fwd_plain(const ConvDesc& d, const void* src_v, const void* wei_v, const void* bias_v, void* dst_v) {
  const float* src = static_cast<const float*>(src_v);
  const float* wei = static_cast<const float*>(wei_v);
  const float* bias = d.has_bias ? static_cast<const float*>(bias_v) : nullptr;
  float* dst = static_cast<float*>(dst_v);
  if (is_depthwise(d)) return conv2d_fwd_depthwise(d, src, wei, bias, dst);
  if (d.nhwc) return conv2d_fwd_nhwc(d, src, wei, bias, dst, d.sum);
  const Geom gm(d);
  const int64_t items = d.N * gm.G;
  const int64_t parts = num_parts(items);
  Scratch cols(gm.direct ? 0 : parts, gm.col_elems(d));
  run_parts(items, parts, [&](int64_t part, int64_t item) {
    const int64_t n = item / gm.G, g = item % gm.G;
    const float* s = src + (n * d.C + g * gm.Cg) * gm.HW;
    const float* w = wei + g * gm.Kg * gm.CRS;
    float* o = dst + (n * d.K + g * gm.Kg) * gm.PQ;
    if (bias)  // sgemm then adds onto it (beta 1)
      for (int64_t k = 0; k < gm.Kg; ++k) std::fill(o + k * gm.PQ, o + (k + 1) * gm.PQ, bias[g * gm.Kg + k]);
    const float beta = bias ? 1.f : 0.f;
    if (gm.direct) {
      sgemm(false, false, gm.Kg, gm.PQ, gm.CRS, 1.f, w, gm.CRS, s, gm.PQ, beta, o, gm.PQ);
      return;
    }
    float* col = cols.slice(part);
    for (int64_t p0 = 0; p0 < d.P; p0 += gm.chunk_rows) {
      const int64_t p1 = std::min(d.P, p0 + gm.chunk_rows), ncol = (p1 - p0) * d.Q;
      im2col(d, gm, s, p0, p1, col);
      sgemm(false, false, gm.Kg, ncol, gm.CRS, 1.f, w, gm.CRS, col, ncol, beta, o + p0 * d.Q, gm.PQ);
    }
  });
}

void conv2d_fwd(const ConvDesc& d, const void* src, const void* wei, const void* bias, void* dst) {
  if (d.dtype == DType::bfloat16) {
    if (conv_direct_bf16_applies(d))
      return conv2d_fwd_direct_bf16(d, static_cast<const uint16_t*>(src), static_cast<const uint16_t*>(wei),
                                    static_cast<const float*>(bias), static_cast<uint16_t*>(dst), d.sum);
    return conv2d_fwd_bf16(d, src, wei, bias, dst);
  }
  if (conv_direct_fwd_applies(d))  // ReLU and residual applied in the tile's store
    return conv2d_fwd_direct(d, static_cast<const float*>(src), static_cast<const float*>(wei),
                             static_cast<const float*>(bias), static_cast<float*>(dst), d.sum);
  conv2d_fwd_plain(d, src, wei, bias, dst);
  if (!d.relu) return;
  // The fused ReLU: one pass over the output while much of it is still in cache (the op saves
  // the separate ReLU's allocation and dispatch).
  float* o = static_cast<float*>(dst);
  parallel_for(0, d.dst_elems(), 65536, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) o[i] = o[i] > 0.f ? o[i] : 0.f;
  });
}

void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst_v, const void* wei_v, void* diff_src_v) {
  if (d.dtype == DType::bfloat16) {
    if (conv_direct_bwd_data_bf16_applies(d))
      return conv2d_bwd_data_direct_bf16(d, static_cast<const uint16_t*>(diff_dst_v),
                                         static_cast<const uint16_t*>(wei_v), static_cast<uint16_t*>(diff_src_v));
    return conv2d_bwd_data_bf16(d, diff_dst_v, wei_v, diff_src_v);
  }
  const float* diff_dst = static_cast<const float*>(diff_dst_v);
  const float* wei = static_cast<const float*>(wei_v);
  float* diff_src = static_cast<float*>(diff_src_v);
  if (is_depthwise(d)) return conv2d_bwd_data_depthwise(d, diff_dst, wei, diff_src);
  if (conv_direct_bwd_data_applies(d)) return conv2d_bwd_data_direct(d, diff_dst, wei, diff_src);
  if (d.nhwc) return conv2d_bwd_data_nhwc(d, diff_dst, wei, diff_src);
  const Geom gm(d);
  const int64_t items = d.N * gm.G;
  const int64_t parts = num_parts(items);
  Scratch cols(gm.direct ? 0 : parts, gm.col_elems(d));
  run_parts(items, parts, [&](int64_t part, int64_t item) {
    const int64_t n = item / gm.G, g = item % gm.G;
    const float* dd = diff_dst + (n * d.K + g * gm.Kg) * gm.PQ;
    const float* w = wei + g * gm.Kg * gm.CRS;
    float* ds = diff_src + (n * d.C + g * gm.Cg) * gm.HW;
    if (gm.direct) {  // diff_src_g [Cg, HW] = wei_g^T [Cg, Kg] * diff_dst_g [Kg, PQ], PQ == HW
      sgemm(true, false, gm.Cg, gm.PQ, gm.Kg, 1.f, w, gm.CRS, dd, gm.PQ, 0.f, ds, gm.HW);
      return;
    }
    zero(ds, gm.Cg * gm.HW);
    float* col = cols.slice(part);
    for (int64_t p0 = 0; p0 < d.P; p0 += gm.chunk_rows) {
      const int64_t p1 = std::min(d.P, p0 + gm.chunk_rows), ncol = (p1 - p0) * d.Q;
      sgemm(true, false, gm.CRS, ncol, gm.Kg, 1.f, w, gm.CRS, dd + p0 * d.Q, gm.PQ, 0.f, col, ncol);
      col2im(d, gm, col, p0, p1, ds);
    }
  });
}

void conv2d_bwd_weights(const ConvDesc& d, const void* src_v, const void* diff_dst_v, void* diff_wei_v,
                        void* diff_bias_v) {
  if (d.dtype == DType::bfloat16) {
    // The direct path sums in float32 tiles (widened operands): ahead of the bfloat16 GEMM only
    // for a first layer's few input channels (7x7, 3 -> 64: 79 vs 43 GFLOP/s on one Zen 4 core;
    // 3x3, 64 -> 64: 96 vs 144).
    if (d.C < 16 && conv_direct_bf16_applies(d))
      return conv2d_bwd_weights_direct_bf16(d, static_cast<const uint16_t*>(src_v),
                                            static_cast<const uint16_t*>(diff_dst_v), static_cast<uint16_t*>(diff_wei_v),
                                            static_cast<float*>(diff_bias_v));
    return conv2d_bwd_weights_bf16(d, src_v, diff_dst_v, diff_wei_v, diff_bias_v);
  }
  const float* src = static_cast<const float*>(src_v);
  const float* diff_dst = static_cast<const float*>(diff_dst_v);
  float* diff_wei = static_cast<float*>(diff_wei_v);
  float* diff_bias = static_cast<float*>(diff_bias_v);
  if (is_depthwise(d)) return conv2d_bwd_weights_depthwise(d, src, diff_dst, diff_wei, diff_bias);
  if (d.nhwc) return conv2d_bwd_weights_nhwc(d, src, diff_dst, diff_wei, diff_bias);
  const Geom gm(d);

  if (diff_bias) {  // one channel per thread, fixed summation order: independent of thread count
    parallel_for(0, d.K, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.N * gm.PQ)), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        double acc = 0;  // double: N*P*Q terms of either sign
        for (int64_t n = 0; n < d.N; ++n) {
          const float* row = diff_dst + (n * d.K + k) * gm.PQ;
          float part[8] = {};
          int64_t i = 0;
          for (; i + 8 <= gm.PQ; i += 8)
            for (int j = 0; j < 8; ++j) part[j] += row[i + j];
          float t = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
          for (; i < gm.PQ; ++i) t += row[i];
          acc += t;
        }
        diff_bias[k] = float(acc);
      }
    });
  }
  if (!diff_wei) return;
  const int64_t wei_elems = d.wei_elems();
  if (d.N == 0) {
    std::memset(diff_wei, 0, sizeof(float) * size_t(wei_elems));
    return;
  }

  // diff_wei_g (+)= diff_dst_g [Kg, PQ] * col^T [PQ, CRS] for image n, into dw (beta 0 when `first`).
  auto accumulate = [&](int64_t n, int64_t g, float* col, float* dw, bool first) {
    const float* s = src + (n * d.C + g * gm.Cg) * gm.HW;
    const float* dd = diff_dst + (n * d.K + g * gm.Kg) * gm.PQ;
    float* dwg = dw + g * gm.Kg * gm.CRS;
    if (gm.direct) {
      sgemm(false, true, gm.Kg, gm.CRS, gm.PQ, 1.f, dd, gm.PQ, s, gm.PQ, first ? 0.f : 1.f, dwg, gm.CRS);
      return;
    }
    for (int64_t p0 = 0; p0 < d.P; p0 += gm.chunk_rows) {
      const int64_t p1 = std::min(d.P, p0 + gm.chunk_rows), ncol = (p1 - p0) * d.Q;
      im2col(d, gm, s, p0, p1, col);
      sgemm(false, true, gm.Kg, gm.CRS, ncol, 1.f, dd + p0 * d.Q, gm.PQ, col, ncol, first && p0 == 0 ? 0.f : 1.f,
            dwg, gm.CRS);
    }
  };

  const int64_t parts = num_parts(d.N);
  if (parts > 1) {
    // Split the batch: part 0 accumulates straight into diff_wei, the others into partials that
    // are added afterwards in part order.
    Scratch cols(gm.direct ? 0 : parts, gm.col_elems(d));
    Scratch partials(parts - 1, wei_elems);
    parallel_for(0, parts, 1, [&](int64_t b, int64_t e) {
      for (int64_t part = b; part < e; ++part) {
        float* dw = part == 0 ? diff_wei : partials.slice(part - 1);
        const int64_t n0 = part * d.N / parts, n1 = (part + 1) * d.N / parts;
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t g = 0; g < gm.G; ++g) accumulate(n, g, cols.slice(part), dw, n == n0);
      }
    });
    parallel_for(0, wei_elems, 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t p = 1; p < parts; ++p) {
        const float* part = partials.slice(p - 1);
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) diff_wei[i] += part[i];
      }
    });
    return;
  }
  // Batch too small to split: split the groups if there are enough (each group's slice of
  // diff_wei is disjoint), else one (image, group) at a time with the whole team in sgemm.
  const int64_t gparts = num_parts(gm.G);
  Scratch cols(gm.direct ? 0 : gparts, gm.col_elems(d));
  run_parts(gm.G, gparts, [&](int64_t part, int64_t g) {
    for (int64_t n = 0; n < d.N; ++n) accumulate(n, g, cols.slice(part), diff_wei, n == 0);
  });
}

}  // namespace kiln::native
