// kiln's own CUDA optimizer updates (declared in optim.h). Each element runs the single-tensor
// formula of kernels/common/optim.h in the reference's operation order (scalars rounded to T
// once, on the host). The multi-tensor kernel gives every block one fixed chunk of one tensor:
// block k finds its entry by binary search over the entries' chunk_begin (a handful of cached
// loads), so a whole model's parameters are updated by one launch whatever their sizes.
// sum_squares: G fixed per-block partials (G depends on n only), then one block adds them by a
// fixed tree, all in double: the same bits every run.
// Test (emulated): ctest --test-dir build -R emu
#include "kernels/cuda/native/optim.h"

#include "kernels/cuda/launch.h"

#include <cmath>

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;
constexpr int kChunkThreads = 512;   // threads of a multi-tensor block
constexpr int kSumThreads = 256;
constexpr int64_t kMaxPartials = 1024;  // blocks of the first sum_squares pass (<= kSumThreads * 4)

KILN_DEVICE inline float dsqrt(float x) { return sqrtf(x); }
KILN_DEVICE inline double dsqrt(double x) { return sqrt(x); }

int64_t grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return b < 1 ? 1 : (b > 65535 ? 65535 : b);
}
// For the grid-stride update kernels (KILN_OPTIM_LOOP).
int64_t stride_grid_for(int64_t n) {
  const int64_t b = grid_for(n);
  return b < KILN_GRID_STRIDE_CAP(65535) ? b : KILN_GRID_STRIDE_CAP(65535);
}

template <class T>
struct SgdK {
  T wd, m, keep, alpha;
  bool decay, momentum, first, nesterov;
};
template <class T>
SgdK<T> sgd_k(const SGDStepDesc& d) {
  return SgdK<T>{T(d.weight_decay), T(d.momentum), T(1 - d.dampening), T(-d.lr),
                 d.weight_decay != 0, d.momentum != 0, d.first, d.nesterov};
}
template <class T>
KILN_DEVICE inline void sgd_at(const SgdK<T>& k, T* p, const T* g, T* buf, int64_t i) {
  T dp = g[i];
  if (k.decay) dp = dp + k.wd * p[i];
  if (k.momentum) {
    const T nb = k.first ? dp : T(buf[i] * k.m) + k.keep * dp;
    buf[i] = nb;
    dp = k.nesterov ? dp + k.m * nb : nb;
  }
  p[i] = p[i] + k.alpha * dp;
}

template <class T>
struct AdamK {
  T decay, wd, b1, b2, c1, c2, eps, bc2, neg_step;
  bool decoupled, l2;
};
template <class T>
AdamK<T> adam_k(const AdamStepDesc& d) {  // the bias corrections in double, as torch.optim
  const double step_size = d.lr / (1 - std::pow(d.beta1, double(d.step)));
  const double bc2_sqrt = std::sqrt(1 - std::pow(d.beta2, double(d.step)));
  const bool wd = d.weight_decay != 0;
  return AdamK<T>{T(1 - d.lr * d.weight_decay), T(d.weight_decay), T(d.beta1), T(d.beta2), T(1 - d.beta1),
                  T(1 - d.beta2), T(d.eps), T(bc2_sqrt), T(-step_size), wd && d.decoupled, wd && !d.decoupled};
}
template <class T>
KILN_DEVICE inline void adam_at(const AdamK<T>& k, T* p, const T* g, T* m, T* v, int64_t i) {
  T pi = p[i], gi = g[i];
  if (k.decoupled) pi = pi * k.decay;
  if (k.l2) gi = gi + k.wd * pi;
  const T mi = T(m[i] * k.b1) + k.c1 * gi;
  const T vi = T(v[i] * k.b2) + T(k.c2 * gi) * gi;
  m[i] = mi;
  v[i] = vi;
  const T denom = T(dsqrt(vi) / k.bc2) + k.eps;
  p[i] = pi + T(k.neg_step * mi) / denom;
}

template <class T>
struct LarsK {
  T wd, m;
  double lr;  // times the tensor's local rate, then rounded to T
  bool decay;
};
template <class T>
LarsK<T> lars_k(const LarsStepDesc& d) {
  return LarsK<T>{T(d.weight_decay), T(d.momentum), d.lr, d.weight_decay != 0};
}
template <class T>
KILN_DEVICE inline void lars_at(const LarsK<T>& k, T rate, T* p, const T* g, T* buf, int64_t i) {
  const T u = k.decay ? g[i] + k.wd * p[i] : g[i];
  const T nb = T(buf[i] * k.m) + rate * u;
  buf[i] = nb;
  p[i] = p[i] - nb;
}

#define KILN_OPTIM_LOOP(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

template <class T>
KILN_GLOBAL void sgd_kernel(SgdK<T> k, int64_t n, T* p, const T* g, T* buf) {
  KILN_OPTIM_LOOP(i, n) sgd_at(k, p, g, buf, i);
}
template <class T>
KILN_GLOBAL void adam_kernel(AdamK<T> k, int64_t n, T* p, const T* g, T* m, T* v) {
  KILN_OPTIM_LOOP(i, n) adam_at(k, p, g, m, v, i);
}
template <class T>
KILN_GLOBAL void lars_kernel(LarsK<T> k, T rate, int64_t n, T* p, const T* g, T* buf) {
  KILN_OPTIM_LOOP(i, n) lars_at(k, rate, p, g, buf, i);
}
template <class T>
KILN_GLOBAL void scale_kernel(int64_t n, T s, T* x) {
  KILN_OPTIM_LOOP(i, n) x[i] = x[i] * s;
}

KILN_DEVICE inline double block_sum(double v, double* red) {  // fixed tree; blockDim.x == kSumThreads
  const int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    __syncthreads();
  }
  return red[0];
}

// Pass 1: block b sums x^2 over i = b*kSumThreads + t + j*G*kSumThreads (G = gridDim.x, fixed by n).
template <class T>
KILN_GLOBAL void sum_squares_partial_kernel(int64_t n, const T* x, double* partial) {
  KILN_SHARED double red[kSumThreads];
  double acc = 0;
  KILN_OPTIM_LOOP(i, n) acc += double(x[i]) * double(x[i]);
  const double s = block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2: one block adds the G partials: thread t takes t, t + kSumThreads, ... in order.
KILN_GLOBAL void sum_partials_kernel(int64_t g, const double* partial, double* out) {
  KILN_SHARED double red[kSumThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < g; i += kSumThreads) acc += partial[i];
  const double s = block_sum(acc, red);
  if (threadIdx.x == 0) *out = s;
}

// The entry holding chunk k: the last with chunk_begin <= k.
KILN_DEVICE inline int64_t entry_of_chunk(const TensorListEntry* entries, int64_t count, int64_t k) {
  int64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (entries[mid].chunk_begin <= k) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Block k updates chunk k of the list: entry = the last with chunk_begin <= k (entries with no
// elements share their successor's chunk_begin and so are never chosen).
template <class T>
KILN_GLOBAL void multi_tensor_kernel(MultiTensorOp op, int64_t count, int64_t chunk, const TensorListEntry* entries,
                                     SgdK<T> sk, AdamK<T> ak, LarsK<T> lk) {
  const int64_t k = blockIdx.x;
  const TensorListEntry& e = entries[entry_of_chunk(entries, count, k)];
  const int64_t begin = (k - e.chunk_begin) * chunk, end = begin + chunk < e.n ? begin + chunk : e.n;
  T* p = static_cast<T*>(e.param);
  const T* g = static_cast<const T*>(e.grad);
  T* s0 = static_cast<T*>(e.state0);
  T* s1 = static_cast<T*>(e.state1);
  const T rate = T(lk.lr * e.local_lr);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    switch (op) {
      case MultiTensorOp::sgd: sgd_at(sk, p, g, s0, i); break;
      case MultiTensorOp::adam: adam_at(ak, p, g, s0, s1, i); break;
      case MultiTensorOp::lars: lars_at(lk, rate, p, g, s0, i); break;
    }
  }
}

#undef KILN_OPTIM_LOOP

template <class T>
KILN_GLOBAL void multi_sum_squares_partial_kernel(int64_t count, int64_t chunk, const TensorListEntry* entries,
                                                  bool of_grad, double* partial) {
  KILN_SHARED double red[kSumThreads];
  const int64_t k = blockIdx.x;
  const TensorListEntry& e = entries[entry_of_chunk(entries, count, k)];
  const int64_t begin = (k - e.chunk_begin) * chunk, end = begin + chunk < e.n ? begin + chunk : e.n;
  const T* x = static_cast<const T*>(of_grad ? e.grad : e.param);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kSumThreads) acc += double(x[i]) * double(x[i]);
  const double s = block_sum(acc, red);
  if (threadIdx.x == 0) partial[k] = s;
}

KILN_GLOBAL void multi_sum_squares_finish_kernel(int64_t count, int64_t chunk, const TensorListEntry* entries,
                                                 const double* partial, double* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int64_t k0 = entries[i].chunk_begin, nk = (entries[i].n + chunk - 1) / chunk;
  double s = 0;
  for (int64_t k = k0; k < k0 + nk; ++k) s += partial[k];
  out[i] = s;
}

bool float_or_double(DType t) { return t == DType::float32 || t == DType::float64; }

}  // namespace

bool supports_optim_sgd(const SGDStepDesc& d) { return float_or_double(d.dtype); }
bool supports_optim_adam(const AdamStepDesc& d) { return float_or_double(d.dtype); }
bool supports_optim_lars(const LarsStepDesc& d) { return float_or_double(d.dtype); }
bool supports_optim_vec(const VecDesc& d) { return float_or_double(d.dtype); }

void sgd_step(const SGDStepDesc& d, void* param, const void* grad, void* momentum_buffer) {
  if (d.n == 0) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(sgd_kernel<T>, dim3(unsigned(stride_grid_for(d.n))), dim3(kThreads), 0, current_stream(), sgd_k<T>(d),
                d.n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(momentum_buffer));
  });
}

void adam_step(const AdamStepDesc& d, void* param, const void* grad, void* exp_avg, void* exp_avg_sq) {
  if (d.n == 0) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(adam_kernel<T>, dim3(unsigned(stride_grid_for(d.n))), dim3(kThreads), 0, current_stream(), adam_k<T>(d),
                d.n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg),
                static_cast<T*>(exp_avg_sq));
  });
}

void lars_step(const LarsStepDesc& d, void* param, const void* grad, void* momentum_buffer) {
  if (d.n == 0) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(lars_kernel<T>, dim3(unsigned(stride_grid_for(d.n))), dim3(kThreads), 0, current_stream(), lars_k<T>(d),
                T(d.lr * d.local_lr), d.n, static_cast<T*>(param), static_cast<const T*>(grad),
                static_cast<T*>(momentum_buffer));
  });
}

void sum_squares(const VecDesc& d, const void* x, double* out) {
  const int64_t per = int64_t(kSumThreads) * 16;  // elements per block and pass at least
  int64_t g = (d.n + per - 1) / per;
  g = g < 1 ? 1 : (g > kMaxPartials ? kMaxPartials : g);
  Scratch partial(size_t(g) * sizeof(double), current_stream());
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(sum_squares_partial_kernel<T>, dim3(unsigned(g)), dim3(kSumThreads), 0, current_stream(), d.n,
                static_cast<const T*>(x), partial.as<double>());
  });
  KILN_LAUNCH(sum_partials_kernel, dim3(1), dim3(kSumThreads), 0, current_stream(), g,
              static_cast<const double*>(partial.as<double>()), out);
}

void scale(const VecDesc& d, void* x) {
  if (d.n == 0) return;
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(scale_kernel<T>, dim3(unsigned(stride_grid_for(d.n))), dim3(kThreads), 0, current_stream(), d.n,
                T(d.scale), static_cast<T*>(x));
  });
}

bool supports_multi_tensor(const MultiTensorDesc& d) { return float_or_double(d.dtype) && d.chunk > 0; }

void multi_tensor_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
  if (d.total_chunks == 0) return;
  KILN_CHECK(d.count > 0 && entries, "cuda multi_tensor_step: ", d.total_chunks, " chunks but no entries (", d.str(), ")");
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(multi_tensor_kernel<T>, dim3(unsigned(d.total_chunks)), dim3(kChunkThreads), 0, current_stream(), d.op,
                d.count, d.chunk, entries, sgd_k<T>(d.sgd), adam_k<T>(d.adam), lars_k<T>(d.lars));
  });
}

KILN_CUDA_NAMESPACE_END

KILN_CUDA_NAMESPACE_BEGIN

void multi_tensor_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
  if (d.count == 0) return;
  Scratch partial(size_t(d.total_chunks) * sizeof(double), current_stream());
  if (d.total_chunks > 0)
    visit_float(d.dtype, [&](auto tag) {
      using T = decltype(tag);
      KILN_LAUNCH(multi_sum_squares_partial_kernel<T>, dim3(unsigned(d.total_chunks)), dim3(kSumThreads), 0,
                  current_stream(), d.count, d.chunk, entries, of_grad, partial.as<double>());
    });
  KILN_LAUNCH(multi_sum_squares_finish_kernel, dim3(unsigned(grid_for(d.count))), dim3(kThreads), 0, current_stream(),
              d.count, d.chunk, entries, static_cast<const double*>(partial.as<double>()), out);
}

KILN_CUDA_NAMESPACE_END
