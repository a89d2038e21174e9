// kiln's own CUDA batch norm, dropout and softmax (declared in norm.h). Design notes:
//  - batch norm: one kernel family for both layouts. A block owns kCols channels and kRows
//    threads walk a fixed chunk of the N*S "rows" of those channels: NCHW uses (1 x 256)
//    blocks, threads along the contiguous spatial axis; NHWC uses (32 x 8) blocks whose lanes
//    read 32 adjacent channels of a row (coalesced). Grid = channel tiles x row chunks, so even
//    64 channels fill the GPU. Per-block sums in double by a fixed shared-memory tree go to
//    scratch; a thread per channel adds the chunks in order (deterministic, no atomics); then an
//    elementwise pass normalises (forward) or forms dx (backward). Forward sums are shifted by
//    the channel's first element, as the CPU native kernel does, so one read gives mean and
//    variance without cancellation.
//  - dropout: a thread per Philox counter (4 elements), the CPU native kernel's exact integer
//    test (bits >> 8) >= ceil(p 2^24), so the mask is the CPU's bit for bit.
//  - softmax: inner == 1 is a warp per row (shuffle reductions); else a thread per (outer,
//    inner) column walking dim with stride inner, so neighbouring threads read neighbouring
//    addresses.
// Test (emulated): ctest --test-dir build -R emu
#include "kernels/cuda/native/norm.h"

#include "kernels/cuda/launch.h"

#include <cmath>

#include "kernels/common/half.h"
#include "kernels/common/philox.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Compute type (kernels/common/half.h): float for the 16-bit storage types, else the type itself.
template <class T>
using Acc = AccType<T>;

KILN_DEVICE inline float dexp(float x) { return expf(x); }
KILN_DEVICE inline double dexp(double x) { return exp(x); }
KILN_DEVICE inline float dlog(float x) { return logf(x); }
KILN_DEVICE inline double dlog(double x) { return log(x); }

int64_t grid_for(int64_t n, int64_t per_block = kThreads) {
  const int64_t b = (n + per_block - 1) / per_block;
  return b < 1 ? 1 : (b > 65535 ? 65535 : b);
}

// ---------------------------------------------------------------- batch norm
// Rows: the N*S positions of a channel. Partial sums over fixed row chunks (their number depends
// on the shape only), then per channel the chunks are added in order: deterministic.
constexpr int64_t kBnChunkElems = 16384;  // elements one block sums per channel tile
constexpr int64_t kBnMaxChunks = 1024;

// T: data (src, dst and their gradients); P: parameters and statistics (float32 for 16-bit data).
template <class T>
struct BnArgs {
  using P = typename Acc<T>::type;
  int64_t N, C, S;
  bool training, relu, sums;
  double eps, momentum;
  int64_t chunks, chunk_rows;
  const T *src, *diff_dst;
  const P *wei, *bias, *save_mean_in, *save_invstd_in;
  T *dst, *diff_src;
  P *running_mean, *running_var, *save_mean, *save_invstd, *diff_wei, *diff_bias;
  double* part;  // [chunks][C][2] partial sums
  double* coef;  // [C][4] backward coefficients: w invstd, mean(dy), invstd mean(dy xhat), mean
};

#if defined(KILN_EMU_DEVICE)
// The pointers the stream sanitizer checks (kernels/cuda/emu/device.h): the const ones are read.
template <class T>
void emu_accesses(const BnArgs<T>& a, emu_device::Args& x) {
  for (const void* p : {static_cast<const void*>(a.src), static_cast<const void*>(a.diff_dst),
                        static_cast<const void*>(a.wei), static_cast<const void*>(a.bias),
                        static_cast<const void*>(a.save_mean_in), static_cast<const void*>(a.save_invstd_in)})
    x.field(p);
  for (void* p : {static_cast<void*>(a.dst), static_cast<void*>(a.diff_src), static_cast<void*>(a.running_mean),
                  static_cast<void*>(a.running_var), static_cast<void*>(a.save_mean), static_cast<void*>(a.save_invstd),
                  static_cast<void*>(a.diff_wei), static_cast<void*>(a.diff_bias), static_cast<void*>(a.part),
                  static_cast<void*>(a.coef)})
    x.field(p);
}
#endif

// Block shape: kCols channels x kRows row-walkers (kCols * kRows == kThreads, kRows a power of 2).
template <bool kNhwc>
struct BnShape {
  static constexpr int kCols = kNhwc ? 32 : 1;
  static constexpr int kRows = kThreads / kCols;
};

template <bool kNhwc, class T>
KILN_DEVICE inline int64_t bn_at(const BnArgs<T>& a, int64_t r, int64_t c) {
  if (kNhwc) return r * a.C + c;
  const int64_t n = r / a.S;
  return (n * a.C + c) * a.S + (r - n * a.S);
}

// Sum of v over the kRows walkers of each column; every thread of the column gets the total.
template <bool kNhwc>
KILN_DEVICE inline double bn_column_sum(double v, double* red) {
  constexpr int kCols = BnShape<kNhwc>::kCols, kRows = BnShape<kNhwc>::kRows;
  const int x = threadIdx.x, y = threadIdx.y;
  red[y * kCols + x] = v;
  __syncthreads();
  for (int s = kRows / 2; s > 0; s >>= 1) {
    if (y < s) red[y * kCols + x] += red[(y + s) * kCols + x];
    __syncthreads();
  }
  const double total = red[x];
  __syncthreads();  // red is reused by the next sum
  return total;
}

// Grid (channel tiles, chunks). Forward: sum(x - k) and sum((x - k)^2) with k the channel's
// first element (the CPU's shift: E[v^2] - E[v]^2 does not cancel for data far from zero);
// backward: sum(dy) and sum(dy (x - mean)).
template <bool kNhwc, bool kBwd, class T>
KILN_GLOBAL void bn_partial_kernel(BnArgs<T> a) {
  constexpr int kCols = BnShape<kNhwc>::kCols, kRows = BnShape<kNhwc>::kRows;
  KILN_SHARED double red[kThreads];
  const int64_t c = int64_t(blockIdx.x) * kCols + threadIdx.x;
  const bool live = c < a.C;  // dead lanes still join every __syncthreads
  const int64_t m = a.N * a.S, lo = int64_t(blockIdx.y) * a.chunk_rows;
  const int64_t hi = lo + a.chunk_rows < m ? lo + a.chunk_rows : m;
  double u = 0, v = 0;
  if (live) {
    if (kBwd) {
      const double mean = double(a.save_mean_in[c]);
      for (int64_t r = lo + threadIdx.y; r < hi; r += kRows) {
        const int64_t i = bn_at<kNhwc>(a, r, c);
        const double g = double(a.diff_dst[i]);
        u += g;
        v += g * (double(a.src[i]) - mean);
      }
    } else {
      const double k = double(a.src[bn_at<kNhwc>(a, 0, c)]);
      for (int64_t r = lo + threadIdx.y; r < hi; r += kRows) {
        const double t = double(a.src[bn_at<kNhwc>(a, r, c)]) - k;
        u += t;
        v += t * t;
      }
    }
  }
  u = bn_column_sum<kNhwc>(u, red);
  v = bn_column_sum<kNhwc>(v, red);
  if (live && threadIdx.y == 0) {
    a.part[(int64_t(blockIdx.y) * a.C + c) * 2] = u;
    a.part[(int64_t(blockIdx.y) * a.C + c) * 2 + 1] = v;
  }
}

// A thread per channel: adds the chunks in order, then statistics and running stats exactly as
// kernels/cpu/native/norm.cpp computes them.
template <bool kNhwc, class T>
KILN_GLOBAL void bn_finish_fwd_kernel(BnArgs<T> a) {
  using P = typename BnArgs<T>::P;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.C) return;
  const int64_t m = a.N * a.S;
  double mean, var;
  if (a.training) {
    double s1 = 0, s2 = 0;
    for (int64_t g = 0; g < a.chunks; ++g) {
      s1 += a.part[(g * a.C + c) * 2];
      s2 += a.part[(g * a.C + c) * 2 + 1];
    }
    const double mu = s1 / double(m);
    var = s2 / double(m) - mu * mu;
    if (var < 0) var = 0;
    mean = double(a.src[bn_at<kNhwc>(a, 0, c)]) + mu;
    const double unbiased = m > 1 ? var * double(m) / double(m - 1) : var;
    if (a.running_mean)
      a.running_mean[c] = P((1 - a.momentum) * double(a.running_mean[c]) + a.momentum * mean);
    if (a.running_var && m > 1)
      a.running_var[c] = P((1 - a.momentum) * double(a.running_var[c]) + a.momentum * unbiased);
  } else {
    mean = double(a.running_mean[c]);
    var = double(a.running_var[c]);
  }
  a.save_mean[c] = P(mean);
  a.save_invstd[c] = P(1.0 / sqrt(var + a.eps));
}

// y = (x - mu) * scale + shift, the CPU's order (subtracting the mean first stays exact for
// data far from zero), then the fused ReLU (NaN -> 0, the ReLU functor's rule).
template <bool kNhwc, class T>
KILN_GLOBAL void bn_apply_kernel(BnArgs<T> a) {
  const int64_t total = a.N * a.C * a.S;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = kNhwc ? i % a.C : (i / a.S) % a.C;
    using P = typename BnArgs<T>::P;
    const P scale = P((a.wei ? double(a.wei[c]) : 1.0) * double(a.save_invstd[c]));
    const P shift = a.bias ? a.bias[c] : P(0);
    const P v = (P(a.src[i]) - a.save_mean[c]) * scale + shift;
    a.dst[i] = T(a.relu ? (v > P(0) ? v : P(0)) : v);
  }
}

// Per channel: dw = sum(dy xhat), db = sum(dy), and the coefficients of
// dx = w invstd (dy - mean(dy) - xhat mean(dy xhat)) (training) or w invstd dy (eval).
template <class T>
KILN_GLOBAL void bn_finish_bwd_kernel(BnArgs<T> a) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.C) return;
  const int64_t m = a.N * a.S;
  const double invstd = double(a.save_invstd_in[c]);
  double sdy = 0, sdyx = 0;
  if (a.sums)
    for (int64_t g = 0; g < a.chunks; ++g) {
      sdy += a.part[(g * a.C + c) * 2];
      sdyx += a.part[(g * a.C + c) * 2 + 1];
    }
  sdyx *= invstd;
  using P = typename BnArgs<T>::P;
  if (a.diff_wei) a.diff_wei[c] = P(sdyx);
  if (a.diff_bias) a.diff_bias[c] = P(sdy);
  if (!a.coef) return;
  a.coef[c * 4] = (a.wei ? double(a.wei[c]) : 1.0) * invstd;
  a.coef[c * 4 + 1] = a.training ? sdy / double(m) : 0.0;
  a.coef[c * 4 + 2] = a.training ? invstd * sdyx / double(m) : 0.0;
  a.coef[c * 4 + 3] = double(a.save_mean_in[c]);
}

template <bool kNhwc, class T>
KILN_GLOBAL void bn_bwd_apply_kernel(BnArgs<T> a) {
  const int64_t total = a.N * a.C * a.S;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = kNhwc ? i % a.C : (i / a.S) % a.C;
    const double* k = a.coef + c * 4;
    using P = typename BnArgs<T>::P;
    const P w = P(k[0]), mdy = P(k[1]), kx = P(k[2]), mu = P(k[3]), g = P(a.diff_dst[i]);
    a.diff_src[i] = T(a.training ? w * (g - mdy - (P(a.src[i]) - mu) * kx) : w * g);
  }
}

// Chunks of rows for the partial sums: a function of the shape only.
template <bool kNhwc, class T>
void bn_plan(BnArgs<T>& a) {
  const int64_t m = a.N * a.S, per = kBnChunkElems / BnShape<kNhwc>::kCols;
  int64_t chunks = (m + per - 1) / per;
  chunks = chunks < 1 ? 1 : (chunks > kBnMaxChunks ? kBnMaxChunks : chunks);
  a.chunk_rows = (m + chunks - 1) / chunks;
  a.chunks = (m + a.chunk_rows - 1) / a.chunk_rows;
}

template <bool kNhwc, bool kBwd, class T>
void bn_launch_partial(const BnArgs<T>& a) {
  constexpr int kCols = BnShape<kNhwc>::kCols, kRows = BnShape<kNhwc>::kRows;
  KILN_LAUNCH((bn_partial_kernel<kNhwc, kBwd, T>), dim3(unsigned((a.C + kCols - 1) / kCols), unsigned(a.chunks)),
              dim3(kCols, kRows), 0, current_stream(), a);
}

template <bool kNhwc, class T>
void bn_launch_fwd(BnArgs<T> a) {
  bn_plan<kNhwc>(a);
  Scratch part(a.training ? size_t(a.chunks * a.C * 2) * sizeof(double) : 0, current_stream());
  a.part = part.as<double>();
  if (a.training) bn_launch_partial<kNhwc, false>(a);
  KILN_LAUNCH((bn_finish_fwd_kernel<kNhwc, T>), dim3(unsigned(grid_for(a.C))), dim3(kThreads), 0, current_stream(), a);
  KILN_LAUNCH((bn_apply_kernel<kNhwc, T>), dim3(unsigned(grid_for(a.N * a.C * a.S))), dim3(kThreads), 0,
              current_stream(), a);
}

template <bool kNhwc, class T>
void bn_launch_bwd(BnArgs<T> a) {
  bn_plan<kNhwc>(a);
  a.sums = a.training || a.diff_wei || a.diff_bias;
  Scratch part(a.sums ? size_t(a.chunks * a.C * 2) * sizeof(double) : 0, current_stream());
  Scratch coef(a.diff_src ? size_t(a.C * 4) * sizeof(double) : 0, current_stream());
  a.part = part.as<double>();
  a.coef = coef.as<double>();
  if (a.sums) bn_launch_partial<kNhwc, true>(a);
  KILN_LAUNCH(bn_finish_bwd_kernel<T>, dim3(unsigned(grid_for(a.C))), dim3(kThreads), 0, current_stream(), a);
  if (a.diff_src)
    KILN_LAUNCH((bn_bwd_apply_kernel<kNhwc, T>), dim3(unsigned(grid_for(a.N * a.C * a.S))), dim3(kThreads), 0,
                current_stream(), a);
}

// ---------------------------------------------------------------- dropout
template <class T>
KILN_GLOBAL void dropout_fwd_kernel(int64_t n, uint64_t seed, uint64_t offset, uint32_t thr,
                                    typename Acc<T>::type scale, const T* src, T* dst, uint8_t* mask) {
  using A = typename Acc<T>::type;
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    const Philox4x32 r = philox4x32(seed, offset + uint64_t(g));  // elements 4g .. 4g+3
    for (int l = 0; l < 4; ++l) {
      const int64_t i = 4 * g + l;
      if (i >= n) break;
      const uint32_t keep = (r.v[l] >> 8) >= thr ? 1u : 0u;
      mask[i] = uint8_t(keep);
      dst[i] = T(A(src[i]) * (A(int32_t(keep)) * scale));  // x * mask * scale (inf * 0 = NaN, as PyTorch)
    }
  }
}

template <class T>
KILN_GLOBAL void dropout_bwd_kernel(int64_t n, typename Acc<T>::type scale, const T* dy, const uint8_t* mask, T* dx) {
  using A = typename Acc<T>::type;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = T(A(dy[i]) * (mask[i] ? scale : A(0)));
}

// ---------------------------------------------------------------- softmax
template <class T>
KILN_DEVICE inline T warp_max(T v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const T u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

template <class T>
KILN_DEVICE inline T warp_sum(T v) {  // butterfly: every lane ends with the same bits
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Softmax kernels load T, compute in A = Acc<T> (float for the 16-bit types) and store T.
template <class T>
KILN_GLOBAL void softmax_fwd_rows_kernel(int64_t rows, int64_t D, bool log_out, const T* src, T* dst) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t o = int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp; o < rows; o += warps) {
    const T* x = src + o * D;
    T* y = dst + o * D;
    A mx = A(x[0]);
    for (int64_t k = lane; k < D; k += kWarp) mx = A(x[k]) > mx ? A(x[k]) : mx;
    mx = warp_max(mx);
    A sum = 0;
    for (int64_t k = lane; k < D; k += kWarp) sum += dexp(A(x[k]) - mx);
    sum = warp_sum(sum);
    if (log_out) {
      const A lse = mx + dlog(sum);
      for (int64_t k = lane; k < D; k += kWarp) y[k] = T(A(x[k]) - lse);
    } else {
      const A inv = A(1) / sum;
      for (int64_t k = lane; k < D; k += kWarp) y[k] = T(dexp(A(x[k]) - mx) * inv);
    }
  }
}

template <class T>
KILN_GLOBAL void softmax_bwd_rows_kernel(int64_t rows, int64_t D, bool log_out, const T* y, const T* dy, T* dx) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t o = int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp; o < rows; o += warps) {
    const T* yr = y + o * D;
    const T* g = dy + o * D;
    T* out = dx + o * D;
    A acc = 0;
    for (int64_t k = lane; k < D; k += kWarp) acc += log_out ? A(g[k]) : A(g[k]) * A(yr[k]);
    acc = warp_sum(acc);
    for (int64_t k = lane; k < D; k += kWarp)
      out[k] = T(log_out ? A(g[k]) - dexp(A(yr[k])) * acc : A(yr[k]) * (A(g[k]) - acc));
  }
}

template <class T>
KILN_GLOBAL void softmax_fwd_cols_kernel(int64_t outer, int64_t D, int64_t I, bool log_out, const T* src, T* dst) {
  using A = typename Acc<T>::type;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < outer * I; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (t / I) * D * I + t % I;
    const T* x = src + base;
    T* y = dst + base;
    A mx = A(x[0]);
    for (int64_t k = 1; k < D; ++k) mx = A(x[k * I]) > mx ? A(x[k * I]) : mx;
    A sum = 0;
    for (int64_t k = 0; k < D; ++k) sum += dexp(A(x[k * I]) - mx);
    if (log_out) {
      const A lse = mx + dlog(sum);
      for (int64_t k = 0; k < D; ++k) y[k * I] = T(A(x[k * I]) - lse);
    } else {
      const A inv = A(1) / sum;
      for (int64_t k = 0; k < D; ++k) y[k * I] = T(dexp(A(x[k * I]) - mx) * inv);
    }
  }
}

template <class T>
KILN_GLOBAL void softmax_bwd_cols_kernel(int64_t outer, int64_t D, int64_t I, bool log_out, const T* y, const T* dy,
                                         T* dx) {
  using A = typename Acc<T>::type;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < outer * I; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (t / I) * D * I + t % I;
    A acc = 0;
    for (int64_t k = 0; k < D; ++k) {
      const int64_t j = base + k * I;
      acc += log_out ? A(dy[j]) : A(dy[j]) * A(y[j]);
    }
    for (int64_t k = 0; k < D; ++k) {
      const int64_t j = base + k * I;
      dx[j] = T(log_out ? A(dy[j]) - dexp(A(y[j])) * acc : A(y[j]) * (A(dy[j]) - acc));
    }
  }
}

bool float_or_double(DType t) { return t == DType::float32 || t == DType::float64; }
bool storage_dtype(DType t) { return float_or_double(t) || t == DType::bfloat16 || t == DType::float16; }

// f(T{}) with T the storage type of t: float, double, BFloat16 or Half.
template <class F>
void visit_storage(DType t, F&& f) {
  switch (t) {
    case DType::float64: f(double{}); break;
    case DType::bfloat16: f(BFloat16{}); break;
    case DType::float16: f(Half{}); break;
    default: f(float{}); break;
  }
}

}  // namespace

bool supports_batch_norm(const BatchNormDesc& d) { return storage_dtype(d.dtype); }

// dtype bfloat16/float16: src, dst and their gradients in that type; weights, statistics and
// their gradients float32 (BatchNormDesc's contract).
void batch_norm_fwd(const BatchNormDesc& d, const void* src, const void* wei, const void* bias, void* running_mean,
                    void* running_var, void* dst, void* save_mean, void* save_invstd) {
  if (d.N * d.C * d.S == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    using P = typename Acc<T>::type;
    BnArgs<T> a{};
    a.N = d.N, a.C = d.C, a.S = d.S, a.training = d.training, a.relu = d.relu, a.eps = d.eps, a.momentum = d.momentum;
    a.src = static_cast<const T*>(src), a.wei = static_cast<const P*>(wei), a.bias = static_cast<const P*>(bias);
    a.running_mean = static_cast<P*>(running_mean), a.running_var = static_cast<P*>(running_var);
    a.dst = static_cast<T*>(dst), a.save_mean = static_cast<P*>(save_mean);
    a.save_invstd = static_cast<P*>(save_invstd);
    if (d.nhwc) bn_launch_fwd<true>(a); else bn_launch_fwd<false>(a);
  });
}

void batch_norm_bwd(const BatchNormDesc& d, const void* src, const void* diff_dst, const void* wei,
                    const void* save_mean, const void* save_invstd, void* diff_src, void* diff_wei, void* diff_bias) {
  if (d.N * d.C * d.S == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    using P = typename Acc<T>::type;
    BnArgs<T> a{};
    a.N = d.N, a.C = d.C, a.S = d.S, a.training = d.training, a.eps = d.eps;
    a.src = static_cast<const T*>(src), a.diff_dst = static_cast<const T*>(diff_dst);
    a.wei = static_cast<const P*>(wei), a.save_mean_in = static_cast<const P*>(save_mean);
    a.save_invstd_in = static_cast<const P*>(save_invstd), a.diff_src = static_cast<T*>(diff_src);
    a.diff_wei = static_cast<P*>(diff_wei), a.diff_bias = static_cast<P*>(diff_bias);
    if (d.nhwc) bn_launch_bwd<true>(a); else bn_launch_bwd<false>(a);
  });
}

bool supports_dropout(const DropoutDesc& d) { return storage_dtype(d.dtype); }

void dropout_fwd(const DropoutDesc& d, const void* src, void* dst, uint8_t* mask) {
  if (d.n == 0) return;
  // uniform >= p  <=>  (bits >> 8) >= ceil(p 2^24): exact, the CPU native kernel's test.
  const uint32_t thr = uint32_t(std::ceil(d.p * 16777216.0));
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(dropout_fwd_kernel<T>, dim3(unsigned(grid_for((d.n + 3) / 4))), dim3(kThreads), 0, current_stream(),
                d.n, d.seed, d.offset, thr, typename Acc<T>::type(d.scale()), static_cast<const T*>(src),
                static_cast<T*>(dst), mask);
  });
}

void dropout_bwd(const DropoutDesc& d, const void* diff_dst, const uint8_t* mask, void* diff_src) {
  if (d.n == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(dropout_bwd_kernel<T>, dim3(unsigned(grid_for(d.n))), dim3(kThreads), 0, current_stream(), d.n,
                typename Acc<T>::type(d.scale()), static_cast<const T*>(diff_dst), mask, static_cast<T*>(diff_src));
  });
}

bool supports_softmax(const SoftmaxDesc& d) { return storage_dtype(d.dtype) && d.dim > 0; }

void softmax_fwd(const SoftmaxDesc& d, const void* src, void* dst) {
  if (d.outer * d.inner == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(src);
    T* y = static_cast<T*>(dst);
    if (d.inner == 1)
      KILN_LAUNCH(softmax_fwd_rows_kernel<T>, dim3(unsigned(grid_for(d.outer, kThreads / kWarp))), dim3(kThreads), 0,
                  current_stream(), d.outer, d.dim, d.log, x, y);
    else
      KILN_LAUNCH(softmax_fwd_cols_kernel<T>, dim3(unsigned(grid_for(d.outer * d.inner))), dim3(kThreads), 0,
                  current_stream(), d.outer, d.dim, d.inner, d.log, x, y);
  });
}

void softmax_bwd(const SoftmaxDesc& d, const void* dst, const void* diff_dst, void* diff_src) {
  if (d.outer * d.inner == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* y = static_cast<const T*>(dst);
    const T* g = static_cast<const T*>(diff_dst);
    T* dx = static_cast<T*>(diff_src);
    if (d.inner == 1)
      KILN_LAUNCH(softmax_bwd_rows_kernel<T>, dim3(unsigned(grid_for(d.outer, kThreads / kWarp))), dim3(kThreads), 0,
                  current_stream(), d.outer, d.dim, d.log, y, g, dx);
    else
      KILN_LAUNCH(softmax_bwd_cols_kernel<T>, dim3(unsigned(grid_for(d.outer * d.inner))), dim3(kThreads), 0,
                  current_stream(), d.outer, d.dim, d.inner, d.log, y, g, dx);
  });
}

KILN_CUDA_NAMESPACE_END
