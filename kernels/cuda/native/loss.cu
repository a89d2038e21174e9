// kiln's own CUDA losses (declared in loss.h). Design notes:
//  - cross-entropy forward: a warp per sample for [N, C] (lanes stride over classes, shuffle
//    reductions), a thread per (n, s) position for [N, C, S] (neighbouring threads read
//    neighbouring s). loss = lse - (1 - eps) x[t] - eps / C sum_c x[c], the CPU's form.
//  - Reduction none writes per-sample losses from a full grid; mean/sum launch ONE block whose
//    threads (warps) take samples in a fixed order and accumulate in double, then a fixed
//    shared-memory tree: the same bits every run, no atomics. The number of counted targets is
//    summed the same way.
//  - backward is elementwise over the logits; for mean one block first counts the targets that
//    are not ignore_index into scratch.
// Test (emulated): ctest --test-dir build -R emu
#include "kernels/cuda/native/loss.h"

#include "kernels/cuda/launch.h"

#include <cmath>

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 512;  // the single block of reduced losses
constexpr int kWarp = 32;

KILN_DEVICE inline float dexp(float x) { return expf(x); }
KILN_DEVICE inline double dexp(double x) { return exp(x); }
KILN_DEVICE inline float dlog(float x) { return logf(x); }
KILN_DEVICE inline double dlog(double x) { return log(x); }
KILN_DEVICE inline float dlog1p(float x) { return log1pf(x); }
KILN_DEVICE inline double dlog1p(double x) { return log1p(x); }

int64_t grid_for(int64_t n, int64_t per_block = kThreads, int64_t cap = 65535) {
  const int64_t b = (n + per_block - 1) / per_block;
  return b < 1 ? 1 : (b > cap ? cap : b);
}

// Sum over the block by a fixed tree (blockDim.x a power of two, <= kReduceThreads); all get it.
KILN_DEVICE inline double block_sum(double v, double* red) {
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int s = int(blockDim.x) / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  const double r = red[0];
  __syncthreads();
  return r;
}

template <class T>
KILN_DEVICE inline T warp_sum(T v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
KILN_DEVICE inline T warp_max(T v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const T u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

// Number of targets that are not ignore_index, counted by the whole block.
KILN_DEVICE inline double block_count(const int64_t* target, int64_t m, int64_t ignore, double* red) {
  double k = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) k += target[i] != ignore ? 1.0 : 0.0;
  return block_sum(k, red);
}

struct ClassArgs {
  int64_t N, C, S, ignore;
  double eps;
  Reduction reduction;
};

// One sample's loss (and log-sum-exp) by a whole warp (warp == true, S == 1) or one thread.
template <bool kWarpRow, class T>
KILN_DEVICE inline double ce_sample(const ClassArgs& a, const T* src, int64_t t, int64_t n, int64_t s, T* lse_out) {
  const T* x = src + n * a.C * a.S + s;
  const int lane = kWarpRow ? int(threadIdx.x % kWarp) : 0, step = kWarpRow ? kWarp : 1;
  T mx = x[0];
  double sumx = 0;
  for (int64_t c = lane; c < a.C; c += step) {
    const T v = x[c * a.S];
    mx = v > mx ? v : mx;
    sumx += double(v);
  }
  T sum = 0;
  if (kWarpRow) mx = warp_max(mx);
  for (int64_t c = lane; c < a.C; c += step) sum += dexp(x[c * a.S] - mx);
  if (kWarpRow) {
    sum = warp_sum(sum);
    sumx = warp_sum(sumx);
  }
  const T lse = mx + dlog(sum);
  *lse_out = lse;
  if (t == a.ignore) return 0.0;
  return double(lse) - (1 - a.eps) * double(x[t * a.S]) - a.eps / double(a.C) * sumx;
}

// Per-sample losses: warp per sample (kWarpRow) or thread per sample. `reduced`: launched as
// ONE block, losses summed (and targets counted) in a fixed order into dst[0].
template <bool kWarpRow, class T>
KILN_GLOBAL void ce_fwd_kernel(ClassArgs a, bool reduced, const T* src, const int64_t* target, T* dst, T* save_lse) {
  KILN_SHARED double red[kReduceThreads];
  const int64_t m = a.N * a.S;
  const int64_t per_block = kWarpRow ? blockDim.x / kWarp : blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * per_block + (kWarpRow ? threadIdx.x / kWarp : threadIdx.x);
  const bool leader = !kWarpRow || threadIdx.x % kWarp == 0;
  double acc = 0;
  for (int64_t i = first; i < m; i += int64_t(gridDim.x) * per_block) {
    const int64_t n = i / a.S, s = i - n * a.S, t = target[i];
    T lse;
    const double l = ce_sample<kWarpRow>(a, src, t, n, s, &lse);
    if (!leader) continue;
    save_lse[i] = lse;
    if (reduced) acc += l;
    else dst[i] = T(l);
  }
  if (!reduced) return;
  const double total = block_sum(acc, red);
  const double count = a.reduction == Reduction::mean ? block_count(target, m, a.ignore, red) : 1.0;
  if (threadIdx.x == 0) dst[0] = T(a.reduction == Reduction::sum ? total : total / count);
}

template <class T>
KILN_GLOBAL void nll_fwd_kernel(ClassArgs a, bool reduced, const T* src, const int64_t* target, T* dst) {
  KILN_SHARED double red[kReduceThreads];
  const int64_t m = a.N * a.S;
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / a.S, s = i - n * a.S, t = target[i];
    const double l = t == a.ignore ? 0.0 : -double(src[(n * a.C + t) * a.S + s]);
    if (reduced) acc += l;
    else dst[i] = T(l);
  }
  if (!reduced) return;
  const double total = block_sum(acc, red);
  const double count = a.reduction == Reduction::mean ? block_count(target, m, a.ignore, red) : 1.0;
  if (threadIdx.x == 0) dst[0] = T(a.reduction == Reduction::sum ? total : total / count);
}

// g_i for sample i: diff_dst[i] (none), diff_dst[0] (sum), diff_dst[0] / count (mean); 0 when ignored.
// One block counts the targets that are not ignore_index (for mean's divisor).
KILN_GLOBAL void count_targets_kernel(int64_t m, int64_t ignore, const int64_t* target, double* count) {
  KILN_SHARED double red[kReduceThreads];
  const double k = block_count(target, m, ignore, red);
  if (threadIdx.x == 0) *count = k;
}

template <bool kNll, class T>
KILN_GLOBAL void class_bwd_kernel(ClassArgs a, const T* src, const int64_t* target, const T* lse, const T* dy,
                                  const double* count, T* dx) {
  const int64_t m = a.N * a.S, total = m * a.C;
  T scalar = T(0);
  if (a.reduction == Reduction::mean) scalar = T(double(dy[0]) / *count);
  if (a.reduction == Reduction::sum) scalar = dy[0];
  const T eps = T(a.eps), off = T(a.eps / double(a.C));
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = j % a.S, c = (j / a.S) % a.C, n = j / (a.S * a.C), i = n * a.S + s, t = target[i];
    const T g = t == a.ignore ? T(0) : a.reduction == Reduction::none ? dy[i] : scalar;
    if (kNll) {
      dx[j] = c == t ? -g : T(0);
    } else {
      const T p = dexp(src[j] - lse[i]);
      dx[j] = g * (p - (c == t ? T(1) - eps : T(0)) - off);
    }
  }
}

// Launches class_bwd_kernel, with the target count in scratch first for mean.
template <bool kNll, class T>
void class_bwd(const ClassLossDesc& d, const T* src, const int64_t* target, const T* lse, const T* dy, T* dx) {
  const int64_t m = d.N * d.S, total = m * d.C;
  if (total == 0) return;
  const bool mean = d.reduction == Reduction::mean;
  Scratch count(mean ? sizeof(double) : 0, current_stream());
  if (mean)
    KILN_LAUNCH(count_targets_kernel, dim3(1), dim3(kReduceThreads), 0, current_stream(), m, d.ignore_index, target,
                count.as<double>());
  KILN_LAUNCH((class_bwd_kernel<kNll, T>), dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(),
              ClassArgs{d.N, d.C, d.S, d.ignore_index, d.label_smoothing, d.reduction}, src, target, lse, dy,
              static_cast<const double*>(count.as<double>()), dx);
}

// ---------------------------------------------------------------- point losses
template <class T>
KILN_DEVICE inline T softplus_neg(T x) {  // log(1 + exp(-x)) for either sign of x
  const T ax = x < T(0) ? -x : x;
  return dlog1p(dexp(-ax)) + (x < T(0) ? -x : T(0));
}

template <class T>
KILN_DEVICE inline T point_loss_at(PointLoss kind, T x, T t, const T* pw, int64_t i) {
  if (kind == PointLoss::mse) return (x - t) * (x - t);
  const T lw = pw ? T(1) + (pw[i] - T(1)) * t : T(1);
  return (T(1) - t) * x + lw * softplus_neg(x);
}

template <class T>
KILN_GLOBAL void point_fwd_kernel(PointLoss kind, Reduction r, int64_t n, const T* x, const T* t, const T* pw, T* dst) {
  KILN_SHARED double red[kReduceThreads];
  const bool reduced = r != Reduction::none;
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T l = point_loss_at(kind, x[i], t[i], pw, i);
    if (reduced) acc += double(l);
    else dst[i] = l;
  }
  if (!reduced) return;
  const double total = block_sum(acc, red);
  if (threadIdx.x == 0) dst[0] = T(r == Reduction::sum ? total : total / double(n));
}

template <class T>
KILN_GLOBAL void point_bwd_kernel(PointLoss kind, Reduction r, int64_t n, const T* x, const T* t, const T* pw,
                                  const T* dy, T* dx, T* dt) {
  const T scalar = r == Reduction::none ? T(0) : r == Reduction::sum ? dy[0] : T(double(dy[0]) / double(n));
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T g = r == Reduction::none ? dy[i] : scalar;
    if (kind == PointLoss::mse) {
      const T v = T(2) * (x[i] - t[i]) * g;
      if (dx) dx[i] = v;
      if (dt) dt[i] = -v;
    } else {
      const T p = pw ? pw[i] : T(1);
      const T lw = T(1) + (p - T(1)) * t[i];
      if (dx) dx[i] = g * ((T(1) - t[i]) - lw / (T(1) + dexp(x[i])));  // lw * sigmoid(-x)
      if (dt) dt[i] = g * (-x[i] + (p - T(1)) * softplus_neg(x[i]));
    }
  }
}

bool float_or_double(DType t) { return t == DType::float32 || t == DType::float64; }

ClassArgs class_args(const ClassLossDesc& d) {
  return ClassArgs{d.N, d.C, d.S, d.ignore_index, d.label_smoothing, d.reduction};
}

}  // namespace

bool supports_class_loss(const ClassLossDesc& d) { return float_or_double(d.dtype) && d.C > 0; }

void cross_entropy_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst, void* save_lse) {
  const int64_t m = d.N * d.S;
  const bool reduced = d.reduction != Reduction::none;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(src);
    T *y = static_cast<T*>(dst), *lse = static_cast<T*>(save_lse);
    if (d.S == 1) {
      const int64_t blocks = reduced ? 1 : grid_for(m, kThreads / kWarp);
      const int threads = reduced ? kReduceThreads : kThreads;
      KILN_LAUNCH((ce_fwd_kernel<true, T>), dim3(unsigned(blocks)), dim3(threads), 0, current_stream(), class_args(d),
                  reduced, x, target, y, lse);
    } else {
      const int64_t blocks = reduced ? 1 : grid_for(m);
      const int threads = reduced ? kReduceThreads : kThreads;
      KILN_LAUNCH((ce_fwd_kernel<false, T>), dim3(unsigned(blocks)), dim3(threads), 0, current_stream(), class_args(d),
                  reduced, x, target, y, lse);
    }
  });
}

void cross_entropy_bwd(const ClassLossDesc& d, const void* src, const int64_t* target, const void* save_lse,
                       const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    class_bwd<false>(d, static_cast<const T*>(src), target, static_cast<const T*>(save_lse),
                     static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

void nll_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst) {
  const int64_t m = d.N * d.S;
  const bool reduced = d.reduction != Reduction::none;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(nll_fwd_kernel<T>, dim3(unsigned(reduced ? 1 : grid_for(m))), dim3(reduced ? kReduceThreads : kThreads),
                0, current_stream(), class_args(d), reduced, static_cast<const T*>(src), target, static_cast<T*>(dst));
  });
}

void nll_bwd(const ClassLossDesc& d, const int64_t* target, const void* diff_dst, void* diff_src) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    class_bwd<true>(d, static_cast<const T*>(nullptr), target, static_cast<const T*>(nullptr),
                    static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

bool supports_point_loss(const PointLossDesc& d) { return float_or_double(d.dtype); }

void point_loss_fwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight, void* dst) {
  const bool reduced = d.reduction != Reduction::none;
  if (!reduced && d.n == 0) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(point_fwd_kernel<T>, dim3(unsigned(reduced ? 1 : grid_for(d.n))),
                dim3(reduced ? kReduceThreads : kThreads), 0, current_stream(), d.kind, d.reduction, d.n,
                static_cast<const T*>(src), static_cast<const T*>(target), static_cast<const T*>(pos_weight),
                static_cast<T*>(dst));
  });
}

void point_loss_bwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight,
                    const void* diff_dst, void* diff_src, void* diff_target) {
  if (d.n == 0 || (!diff_src && !diff_target)) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(point_bwd_kernel<T>, dim3(unsigned(grid_for(d.n))), dim3(kThreads), 0, current_stream(), d.kind,
                d.reduction, d.n, static_cast<const T*>(src), static_cast<const T*>(target),
                static_cast<const T*>(pos_weight), static_cast<const T*>(diff_dst), static_cast<T*>(diff_src),
                static_cast<T*>(diff_target));
  });
}

KILN_CUDA_NAMESPACE_END
