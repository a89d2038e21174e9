// kiln's own CUDA convolution: im2col / col2im around kernels/cuda/native/gemm.cu.
// Per chunk of images (as many as fit the column-buffer budget, at least one):
//   NCHW: col[b][(c*R + r)*S + s][p*Q + q] (one matrix per image, batched GEMMs over the chunk)
//   NHWC: col[(b*P + p)*Q + q][(c*R + r)*S + s] (pixels as rows, one GEMM per group and chunk)
// so column j of a group's block matches the KCRS weight's row layout. 1x1, stride-1, unpadded
// convolutions use the activations as the column matrix directly.
//   emu test: ctest --test-dir build -R test_conv -L emu
#include "kernels/cuda/native/conv.h"

#include "kernels/cuda/launch.h"

#include "kernels/common/error.h"
#include "kernels/cuda/native/gemm.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = KILN_GRID_STRIDE_CAP(4096);  // every kernel here loops grid-stride
constexpr int64_t kDefaultColBudgetBytes = int64_t(64) << 20;
int64_t g_col_budget_bytes = kDefaultColBudgetBytes;  // set_conv_column_budget (tests)

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// The descriptor's scalars, passed by value to kernels (ConvDesc holds no pointers but is kept
// host-side; this is the part kernels need).
struct Geo {
  int64_t C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
  bool nhwc;
};

Geo geo_of(const ConvDesc& d) {
  return {d.C, d.H, d.W, d.K, d.R, d.S, d.P, d.Q, d.stride_h, d.stride_w, d.pad_h, d.pad_w, d.dilation_h,
          d.dilation_w, d.nhwc};
}

// col for images [n0, n0 + nb): total elements nb * C*R*S * P*Q.
KILN_GLOBAL void im2col_kernel(Geo g, int64_t nb, const float* src, float* col) {
  const int64_t crs = g.C * g.R * g.S, pq = g.P * g.Q, total = nb * crs * pq;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, j, pix;
    if (!g.nhwc) {
      pix = i % pq;
      j = (i / pq) % crs;
      b = i / (pq * crs);
    } else {
      j = i % crs;
      pix = (i / crs) % pq;
      b = i / (crs * pq);
    }
    const int64_t s = j % g.S, r = (j / g.S) % g.R, c = j / (g.S * g.R);
    const int64_t p = pix / g.Q, q = pix % g.Q;
    const int64_t h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
    float v = 0.f;
    if (h >= 0 && h < g.H && w >= 0 && w < g.W)
      v = g.nhwc ? src[((b * g.H + h) * g.W + w) * g.C + c] : src[((b * g.C + c) * g.H + h) * g.W + w];
    col[i] = v;
  }
}

// diff_src of images [n0, n0 + nb) from their col: each input pixel sums its own taps (r, s
// ascending), so the result does not depend on scheduling.
KILN_GLOBAL void col2im_kernel(Geo g, int64_t nb, const float* col, float* diff_src) {
  const int64_t crs = g.C * g.R * g.S, pq = g.P * g.Q, total = nb * g.C * g.H * g.W;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, c, h, w;
    if (!g.nhwc) {
      w = i % g.W;
      h = (i / g.W) % g.H;
      c = (i / (g.W * g.H)) % g.C;
      b = i / (g.W * g.H * g.C);
    } else {
      c = i % g.C;
      w = (i / g.C) % g.W;
      h = (i / (g.C * g.W)) % g.H;
      b = i / (g.C * g.W * g.H);
    }
    float acc = 0.f;
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t hh = h + g.ph - r * g.dh;
      if (hh < 0 || hh % g.sh != 0) continue;
      const int64_t p = hh / g.sh;
      if (p >= g.P) continue;
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t ww = w + g.pw - s * g.dw;
        if (ww < 0 || ww % g.sw != 0) continue;
        const int64_t q = ww / g.sw;
        if (q >= g.Q) continue;
        const int64_t j = (c * g.R + r) * g.S + s;
        acc += g.nhwc ? col[(b * pq + p * g.Q + q) * crs + j] : col[(b * crs + j) * pq + p * g.Q + q];
      }
    }
    diff_src[i] = acc;
  }
}

KILN_GLOBAL void bias_relu_kernel(int64_t total, int64_t K, int64_t pq, bool nhwc, const float* bias, bool relu,
                                  float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = dst[i];
    if (bias) v += bias[nhwc ? i % K : (i / pq) % K];
    if (relu) v = v > 0.f ? v : 0.f;
    dst[i] = v;
  }
}

KILN_GLOBAL void zero_kernel(int64_t total, float* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = 0.f;
}

// diff_bias[k] = sum over (n, p, q) of diff_dst: one block per channel, a fixed-order strided
// sum per thread, then a shared-memory tree (deterministic). T is float, Half or BFloat16; the
// sum is float32 whatever T is (a half diff_dst is widened element by element).
template <class T>
KILN_GLOBAL void bias_grad_kernel(int64_t N, int64_t K, int64_t pq, bool nhwc, const T* diff_dst, float* diff_bias) {
  KILN_SHARED float part[kThreads];
  for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
    float acc = 0.f;
    for (int64_t i = threadIdx.x; i < N * pq; i += blockDim.x) {
      const int64_t n = i / pq, pix = i % pq;
      acc += float(nhwc ? diff_dst[(n * pq + pix) * K + k] : diff_dst[(n * K + k) * pq + pix]);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) diff_bias[k] = part[0];
    __syncthreads();
  }
}

template <class T>
void launch_bias_grad(const ConvDesc& d, const void* diff_dst, void* diff_bias) {
  KILN_LAUNCH(bias_grad_kernel<T>, dim3(unsigned(d.K < kMaxBlocks ? d.K : kMaxBlocks)), dim3(kThreads), 0,
              current_stream(), d.N, d.K, d.P * d.Q, d.nhwc, static_cast<const T*>(diff_dst),
              static_cast<float*>(diff_bias));
}

void check_desc(const ConvDesc& d, const char* what) {
  KILN_CHECK(d.dtype == DType::float32, "cuda native ", what, ": float32 only, got ", d.str());
  KILN_CHECK(!d.sum, "cuda native ", what, ": no sum post-op (residual add): ", d.str());
  KILN_CHECK(d.groups >= 1 && d.C % d.groups == 0 && d.K % d.groups == 0, "cuda native ", what,
             ": channels not divisible by groups: ", d.str());
  KILN_CHECK(d.stride_h >= 1 && d.stride_w >= 1 && d.dilation_h >= 1 && d.dilation_w >= 1, "cuda native ", what,
             ": stride and dilation must be >= 1: ", d.str());
}

// Whether the activations are already the column matrix (no im2col).
bool is_pointwise(const ConvDesc& d) {
  return d.R == 1 && d.S == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0 && d.P == d.H &&
         d.Q == d.W;
}

// Images per chunk so the column buffer stays within budget.
int64_t chunk_images(const ConvDesc& d) {
  const int64_t per_image = d.C * d.R * d.S * d.P * d.Q * int64_t(sizeof(float));
  const int64_t nb = per_image > 0 ? g_col_budget_bytes / per_image : d.N;
  return nb < 1 ? 1 : (nb > d.N ? d.N : nb);
}

}  // namespace

void set_conv_column_budget(int64_t bytes) { g_col_budget_bytes = bytes > 0 ? bytes : kDefaultColBudgetBytes; }

bool supports_conv_bias_grad(const ConvDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float16 || d.dtype == DType::bfloat16) && d.K >= 0 &&
         d.N >= 0 && d.P >= 0 && d.Q >= 0;
}

void conv2d_bias_grad(const ConvDesc& d, const void* diff_dst, void* diff_bias) {
  KILN_CHECK(supports_conv_bias_grad(d), "cuda native conv2d_bias_grad: float32, float16 or bfloat16 diff_dst, got ",
             d.str());
  if (d.K == 0) return;
  switch (d.dtype) {
    case DType::float16: launch_bias_grad<Half>(d, diff_dst, diff_bias); break;
    case DType::bfloat16: launch_bias_grad<BFloat16>(d, diff_dst, diff_bias); break;
    default: launch_bias_grad<float>(d, diff_dst, diff_bias); break;
  }
}

// The residual post-op (ConvDesc::sum) is not implemented here: the op layer runs conv, add and
// ReLU separately when it is refused.
bool supports_conv(const ConvDesc& d) {
  return d.dtype == DType::float32 && !d.sum && d.groups >= 1 && d.C % d.groups == 0 && d.K % d.groups == 0;
}

void conv2d_fwd(const ConvDesc& d, const void* src_v, const void* wei_v, const void* bias_v, void* dst_v) {
  check_desc(d, "conv2d_fwd");
  const float* src = static_cast<const float*>(src_v);
  const float* wei = static_cast<const float*>(wei_v);
  float* dst = static_cast<float*>(dst_v);
  const Geo g = geo_of(d);
  const int64_t G = d.groups, Cg = d.C / G, Kg = d.K / G, crs = d.C * d.R * d.S, cgrs = Cg * d.R * d.S;
  const int64_t pq = d.P * d.Q, hw = d.H * d.W;
  const bool direct = is_pointwise(d);
  const int64_t nb_max = chunk_images(d);
  // The column buffer, stream-ordered (launch.h's Scratch: freed after the queued kernels
  // that use it, so two streams never share one); the integrator may point it at the caching
  // allocator.
  const Scratch col_buf(direct ? 0 : size_t(nb_max * crs * pq) * sizeof(float), current_stream());
  float* col = col_buf.as<float>();
  for (int64_t n0 = 0; n0 < d.N; n0 += nb_max) {
    const int64_t nb = d.N - n0 < nb_max ? d.N - n0 : nb_max;
    const float* cp = direct ? src + n0 * d.C * hw : col;
    if (!direct)
      KILN_LAUNCH(im2col_kernel, dim3(blocks_for(nb * crs * pq)), dim3(kThreads), 0, current_stream(), g, nb,
                  src + n0 * d.C * d.H * d.W, col);
    for (int64_t gi = 0; gi < G; ++gi) {
      if (!d.nhwc)  // dst_b[Kg, PQ] = wei_g[Kg, CgRS] x col_b[CgRS, PQ], batched over the chunk
        sgemm_batched(false, false, Kg, pq, cgrs, 1.f, wei + gi * Kg * cgrs, cgrs, 0, cp + gi * cgrs * pq, pq,
                      crs * pq, 0.f, dst + (n0 * d.K + gi * Kg) * pq, pq, d.K * pq, nb);
      else  // dst[pix, Kg] = col[pix, CgRS] x wei_g^T
        sgemm(false, true, nb * pq, Kg, cgrs, 1.f, cp + gi * cgrs, crs, wei + gi * Kg * cgrs, cgrs, 0.f,
              dst + n0 * pq * d.K + gi * Kg, d.K);
    }
  }
  if (d.has_bias || d.relu)
    KILN_LAUNCH(bias_relu_kernel, dim3(blocks_for(d.dst_elems())), dim3(kThreads), 0, current_stream(), d.dst_elems(),
                d.K, pq, d.nhwc, d.has_bias ? static_cast<const float*>(bias_v) : nullptr, d.relu, dst);
}

void conv2d_bwd_data(const ConvDesc& d, const void* diff_dst_v, const void* wei_v, void* diff_src_v) {
  check_desc(d, "conv2d_bwd_data");
  const float* diff_dst = static_cast<const float*>(diff_dst_v);
  const float* wei = static_cast<const float*>(wei_v);
  float* diff_src = static_cast<float*>(diff_src_v);
  const Geo g = geo_of(d);
  const int64_t G = d.groups, Cg = d.C / G, Kg = d.K / G, crs = d.C * d.R * d.S, cgrs = Cg * d.R * d.S;
  const int64_t pq = d.P * d.Q, hw = d.H * d.W;
  const bool direct = is_pointwise(d);
  const int64_t nb_max = chunk_images(d);
  const Scratch col_buf(direct ? 0 : size_t(nb_max * crs * pq) * sizeof(float), current_stream());
  float* col = col_buf.as<float>();
  for (int64_t n0 = 0; n0 < d.N; n0 += nb_max) {
    const int64_t nb = d.N - n0 < nb_max ? d.N - n0 : nb_max;
    float* cp = direct ? diff_src + n0 * d.C * hw : col;
    for (int64_t gi = 0; gi < G; ++gi) {
      if (!d.nhwc)  // col_b[CgRS, PQ] = wei_g^T x diff_dst_b[Kg, PQ]
        sgemm_batched(true, false, cgrs, pq, Kg, 1.f, wei + gi * Kg * cgrs, cgrs, 0,
                      diff_dst + (n0 * d.K + gi * Kg) * pq, pq, d.K * pq, 0.f, cp + gi * cgrs * pq, pq, crs * pq, nb);
      else  // col[pix, CgRS] = diff_dst[pix, Kg] x wei_g
        sgemm(false, false, nb * pq, cgrs, Kg, 1.f, diff_dst + n0 * pq * d.K + gi * Kg, d.K, wei + gi * Kg * cgrs,
              cgrs, 0.f, cp + gi * cgrs, crs);
    }
    if (!direct)
      KILN_LAUNCH(col2im_kernel, dim3(blocks_for(nb * d.C * hw)), dim3(kThreads), 0, current_stream(), g, nb, col,
                  diff_src + n0 * d.C * hw);
  }
}

void conv2d_bwd_weights(const ConvDesc& d, const void* src_v, const void* diff_dst_v, void* diff_wei_v,
                        void* diff_bias_v) {
  check_desc(d, "conv2d_bwd_weights");
  const float* src = static_cast<const float*>(src_v);
  const float* diff_dst = static_cast<const float*>(diff_dst_v);
  const Geo g = geo_of(d);
  const int64_t G = d.groups, Cg = d.C / G, Kg = d.K / G, crs = d.C * d.R * d.S, cgrs = Cg * d.R * d.S;
  const int64_t pq = d.P * d.Q, hw = d.H * d.W;
  if (diff_bias_v) launch_bias_grad<float>(d, diff_dst, diff_bias_v);
  if (!diff_wei_v) return;
  float* diff_wei = static_cast<float*>(diff_wei_v);
  const bool direct = is_pointwise(d);
  const int64_t nb_max = chunk_images(d);
  const Scratch col_buf(direct ? 0 : size_t(nb_max * crs * pq) * sizeof(float), current_stream());
  float* col = col_buf.as<float>();
  if (d.N == 0) {  // no images: the gradient is zero
    KILN_LAUNCH(zero_kernel, dim3(blocks_for(d.wei_elems())), dim3(kThreads), 0, current_stream(), d.wei_elems(),
                diff_wei);
    return;
  }
  // Chunks (and, for NCHW, images within a chunk) accumulate one after another: beta = 0 for
  // the first GEMM of each group, 1 after, a fixed summation order.
  for (int64_t n0 = 0; n0 < d.N; n0 += nb_max) {
    const int64_t nb = d.N - n0 < nb_max ? d.N - n0 : nb_max;
    const float* cp = direct ? src + n0 * d.C * hw : col;
    if (!direct)
      KILN_LAUNCH(im2col_kernel, dim3(blocks_for(nb * crs * pq)), dim3(kThreads), 0, current_stream(), g, nb,
                  src + n0 * d.C * hw, col);
    for (int64_t gi = 0; gi < G; ++gi) {
      if (!d.nhwc) {  // diff_wei_g[Kg, CgRS] += diff_dst_b[Kg, PQ] x col_b[CgRS, PQ]^T
        for (int64_t b = 0; b < nb; ++b)
          sgemm(false, true, Kg, cgrs, pq, 1.f, diff_dst + ((n0 + b) * d.K + gi * Kg) * pq, pq,
                cp + (b * crs + gi * cgrs) * pq, pq, n0 + b == 0 ? 0.f : 1.f, diff_wei + gi * Kg * cgrs, cgrs);
      } else {  // diff_wei_g[Kg, CgRS] += diff_dst[pix, Kg]^T x col[pix, CgRS]
        sgemm(true, false, Kg, cgrs, nb * pq, 1.f, diff_dst + n0 * pq * d.K + gi * Kg, d.K, cp + gi * cgrs, crs,
              n0 == 0 ? 0.f : 1.f, diff_wei + gi * Kg * cgrs, cgrs);
      }
    }
  }
}

KILN_CUDA_NAMESPACE_END
