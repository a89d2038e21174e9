// kiln's own CUDA pooling and LRN (declared in pool.h). A thread per output element forward, a
// thread per input element backward:
//  - avg backward: input pixel h is in output oy's window iff oy sh - ph <= h < oy sh - ph + kh
//    (the clipped window [max(h0,0), min(h0+kh, ih+ph, ih)) contains every image pixel of the
//    unclipped one), so oy runs over [floor((h+ph-kh)/sh)+1, floor((h+ph)/sh)] ∩ [0, oh);
//  - max backward: the candidates are the outputs whose dilated taps can land on h; the saved
//    argmax decides. The gather visits outputs in (oy, ox) order, the order in which the
//    reference scatters into that pixel, so the sums round identically. PyTorch scatters with
//    atomics here; a gather has no collisions to prove and no order to lose.
//  - adaptive backward: h is in [start(oy), end(oy)) iff floor(h oh/ih) <= oy < ceil((h+1) oh/ih).
// Test (emulated): ctest --test-dir build -R emu
#include "kernels/cuda/native/pool.h"

#include "kernels/cuda/launch.h"

#include <cmath>

#include "kernels/common/error.h"
#include "kernels/common/half.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;

// Compute type (kernels/common/half.h): float for 16-bit storage (max pooling stores the winner as is).
template <class T>
using Acc = AccType<T>;

KILN_DEVICE inline float dpow(float x, float y) { return powf(x, y); }
KILN_DEVICE inline double dpow(double x, double y) { return pow(x, y); }
KILN_DEVICE inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
KILN_DEVICE inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
KILN_DEVICE inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int64_t grid_for(int64_t n) {  // every pooling kernel loops grid-stride (KILN_POOL_LOOP)
  const int64_t b = (n + kThreads - 1) / kThreads;
  return b < 1 ? 1 : (b > KILN_GRID_STRIDE_CAP(65535) ? KILN_GRID_STRIDE_CAP(65535) : b);
}

#define KILN_POOL_LOOP(i, total) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (total); i += int64_t(gridDim.x) * blockDim.x)

// Element e of an [n, c, hh, ww] array (NCHW or NHWC memory) -> plane p and (y, x).
KILN_DEVICE inline void pool_coords(const PoolDesc& d, int64_t e, int64_t hh, int64_t ww, int64_t& p, int64_t& y,
                                    int64_t& x) {
  if (d.nhwc) {
    const int64_t ch = e % d.c, q = e / d.c;
    x = q % ww;
    y = (q / ww) % hh;
    p = (q / (ww * hh)) * d.c + ch;
  } else {
    x = e % ww;
    y = (e / ww) % hh;
    p = e / (ww * hh);
  }
}

// The avg window of output (oy, ox) clipped as PyTorch does, and its divisor (0: empty window).
KILN_DEVICE inline int64_t avg_divisor(const PoolDesc& d, int64_t oy, int64_t ox) {
  const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
  const int64_t h1 = imin(h0 + d.kh, d.ih + d.ph), w1 = imin(w0 + d.kw, d.iw + d.pw);
  const int64_t hs = imax(h0, 0), ws = imax(w0, 0), he = imin(h1, d.ih), we = imin(w1, d.iw);
  if (hs >= he || ws >= we) return 0;
  return d.divisor_override > 0 ? d.divisor_override : d.count_include_pad ? (h1 - h0) * (w1 - w0) : (he - hs) * (we - ws);
}

template <class T>
KILN_GLOBAL void pool_fwd_kernel(PoolDesc d, const T* src, T* dst, int64_t* index) {
  using A = typename Acc<T>::type;
  KILN_POOL_LOOP(o, d.planes() * d.oh * d.ow) {
    int64_t p, oy, ox;
    pool_coords(d, o, d.oh, d.ow, p, oy, ox);
    const int64_t h0 = oy * d.sh - d.ph, w0 = ox * d.sw - d.pw;
    if (d.alg == PoolAlg::max) {
      A best = -A(INFINITY);
      int64_t bi = -1;
      for (int64_t i = 0; i < d.kh; ++i) {
        const int64_t h = h0 + i * d.dh;
        if (h < 0 || h >= d.ih) continue;
        for (int64_t j = 0; j < d.kw; ++j) {
          const int64_t w = w0 + j * d.dw;
          if (w < 0 || w >= d.iw) continue;
          const A v = A(src[d.at(p, h, w, d.ih, d.iw)]);
          if (bi < 0) bi = h * d.iw + w;  // an all -inf window points at its first tap
          if (v > best || v != v) {       // NaN propagates, as in PyTorch
            best = v;
            bi = h * d.iw + w;
          }
        }
      }
      dst[o] = T(best);
      if (index) index[o] = bi;
    } else {
      const int64_t div = avg_divisor(d, oy, ox);
      if (div == 0) {
        dst[o] = T(0);
        continue;
      }
      const int64_t hs = imax(h0, 0), ws = imax(w0, 0);
      const int64_t he = imin(imin(h0 + d.kh, d.ih + d.ph), d.ih), we = imin(imin(w0 + d.kw, d.iw + d.pw), d.iw);
      A sum = 0;
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w) sum += A(src[d.at(p, h, w, d.ih, d.iw)]);
      dst[o] = T(sum / A(div));
    }
  }
}

template <class T>
KILN_GLOBAL void pool_bwd_kernel(PoolDesc d, const T* diff_dst, const int64_t* index, T* diff_src) {
  using A = typename Acc<T>::type;
  KILN_POOL_LOOP(e, d.planes() * d.ih * d.iw) {
    int64_t p, h, w;
    pool_coords(d, e, d.ih, d.iw, p, h, w);
    int64_t ylo, yhi, xlo, xhi;  // candidate outputs, inclusive
    if (d.alg == PoolAlg::max) {
      ylo = imax(0, -floor_div(-(h + d.ph - (d.kh - 1) * d.dh), d.sh));  // ceil
      xlo = imax(0, -floor_div(-(w + d.pw - (d.kw - 1) * d.dw), d.sw));
    } else {
      ylo = imax(0, floor_div(h + d.ph - d.kh, d.sh) + 1);
      xlo = imax(0, floor_div(w + d.pw - d.kw, d.sw) + 1);
    }
    yhi = imin(d.oh - 1, floor_div(h + d.ph, d.sh));
    xhi = imin(d.ow - 1, floor_div(w + d.pw, d.sw));
    const int64_t self = h * d.iw + w;
    A acc = 0;
    for (int64_t oy = ylo; oy <= yhi; ++oy)
      for (int64_t ox = xlo; ox <= xhi; ++ox) {
        const int64_t o = d.at(p, oy, ox, d.oh, d.ow);
        if (d.alg == PoolAlg::max) {
          if (index[o] == self) acc += A(diff_dst[o]);
        } else {
          const int64_t div = avg_divisor(d, oy, ox);
          if (div > 0) acc += A(diff_dst[o]) / A(div);
        }
      }
    diff_src[e] = T(acc);
  }
}

template <class T>
KILN_GLOBAL void adaptive_fwd_kernel(AdaptivePoolDesc d, const T* src, T* dst, int64_t* index) {
  using A = typename Acc<T>::type;
  KILN_POOL_LOOP(o, d.n * d.c * d.oh * d.ow) {
    const int64_t ox = o % d.ow, oy = (o / d.ow) % d.oh, p = o / (d.ow * d.oh);
    const T* s = src + p * d.ih * d.iw;
    const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
    const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
    if (d.alg == PoolAlg::avg) {
      A sum = 0;
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w) sum += A(s[h * d.iw + w]);
      dst[o] = T(sum / A((he - hs) * (we - ws)));
    } else {
      A best = -A(INFINITY);
      int64_t bi = hs * d.iw + ws;
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w) {
          const A v = A(s[h * d.iw + w]);
          if (v > best || v != v) {
            best = v;
            bi = h * d.iw + w;
          }
        }
      dst[o] = T(best);
      if (index) index[o] = bi;
    }
  }
}

template <class T>
KILN_GLOBAL void adaptive_bwd_kernel(AdaptivePoolDesc d, const T* diff_dst, const int64_t* index, T* diff_src) {
  using A = typename Acc<T>::type;
  KILN_POOL_LOOP(e, d.n * d.c * d.ih * d.iw) {
    const int64_t w = e % d.iw, h = (e / d.iw) % d.ih, p = e / (d.iw * d.ih);
    const int64_t ylo = (h * d.oh) / d.ih, yhi = imin(d.oh, ((h + 1) * d.oh + d.ih - 1) / d.ih);
    const int64_t xlo = (w * d.ow) / d.iw, xhi = imin(d.ow, ((w + 1) * d.ow + d.iw - 1) / d.iw);
    const int64_t self = h * d.iw + w;
    A acc = 0;
    for (int64_t oy = ylo; oy < yhi; ++oy) {
      const int64_t hs = adaptive_start(oy, d.oh, d.ih), he = adaptive_end(oy, d.oh, d.ih);
      if (h < hs || h >= he) continue;
      for (int64_t ox = xlo; ox < xhi; ++ox) {
        const int64_t ws = adaptive_start(ox, d.ow, d.iw), we = adaptive_end(ox, d.ow, d.iw);
        if (w < ws || w >= we) continue;
        const int64_t o = (p * d.oh + oy) * d.ow + ox;
        if (d.alg == PoolAlg::max) {
          if (index[o] == self) acc += A(diff_dst[o]);
        } else {
          acc += A(diff_dst[o]) / A((he - hs) * (we - ws));
        }
      }
    }
    diff_src[e] = T(acc);
  }
}

template <class T>
KILN_GLOBAL void lrn_fwd_kernel(LrnDesc d, const T* src, T* dst, T* scale) {
  using A = typename Acc<T>::type;
  KILN_POOL_LOOP(o, d.n * d.c * d.inner) {
    const int64_t i = o % d.inner, c = (o / d.inner) % d.c, n = o / (d.inner * d.c);
    A sum = 0;
    for (int64_t j = imax(0, c - d.size / 2); j <= imin(d.c - 1, c + (d.size - 1) / 2); ++j) {
      const A v = A(src[(n * d.c + j) * d.inner + i]);
      sum += v * v;
    }
    const A s = A(d.k) + A(d.alpha) * (sum / A(d.size));
    scale[o] = T(s);
    dst[o] = T(A(src[o]) / dpow(s, A(d.beta)));
  }
}

template <class T>
KILN_GLOBAL void lrn_bwd_kernel(LrnDesc d, const T* src, const T* dst, const T* scale, const T* diff_dst,
                                T* diff_src) {
  using A = typename Acc<T>::type;
  const A coef = A(2) * A(d.beta) * A(d.alpha) / A(d.size);
  KILN_POOL_LOOP(o, d.n * d.c * d.inner) {
    const int64_t i = o % d.inner, c = (o / d.inner) % d.c, n = o / (d.inner * d.c);
    A acc = 0;  // outputs j whose window [j - size/2, j + (size-1)/2] holds c
    for (int64_t j = imax(0, c - (d.size - 1) / 2); j <= imin(d.c - 1, c + d.size / 2); ++j) {
      const int64_t q = (n * d.c + j) * d.inner + i;
      acc += A(diff_dst[q]) * A(dst[q]) / A(scale[q]);
    }
    diff_src[o] = T(A(diff_dst[o]) * dpow(A(scale[o]), -A(d.beta)) - coef * A(src[o]) * acc);
  }
}

#undef KILN_POOL_LOOP

bool storage_dtype(DType t) {
  return t == DType::float32 || t == DType::float64 || t == DType::bfloat16 || t == DType::float16;
}

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

bool supports_pool(const PoolDesc& d) { return storage_dtype(d.dtype) && d.sh > 0 && d.sw > 0; }
bool supports_adaptive_pool(const AdaptivePoolDesc& d) { return storage_dtype(d.dtype); }
bool supports_lrn(const LrnDesc& d) { return storage_dtype(d.dtype); }

void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index) {
  const int64_t total = d.planes() * d.oh * d.ow;
  if (total == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(pool_fwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), static_cast<T*>(dst), index);
  });
}

void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  const int64_t total = d.planes() * d.ih * d.iw;
  if (total == 0) return;
  KILN_CHECK(d.alg != PoolAlg::max || index, "cuda pool_bwd: max pooling needs the forward's indices (" + d.str() + ")");
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(pool_bwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(diff_dst), index, static_cast<T*>(diff_src));
  });
}

void adaptive_pool_fwd(const AdaptivePoolDesc& d, const void* src, void* dst, int64_t* index) {
  const int64_t total = d.planes() * d.oh * d.ow;
  if (total == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(adaptive_fwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), static_cast<T*>(dst), index);
  });
}

void adaptive_pool_bwd(const AdaptivePoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src) {
  const int64_t total = d.planes() * d.ih * d.iw;
  if (total == 0) return;
  KILN_CHECK(d.alg != PoolAlg::max || index, "cuda adaptive_pool_bwd: max pooling needs the forward's indices (" + d.str() + ")");
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(adaptive_bwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(diff_dst), index, static_cast<T*>(diff_src));
  });
}

void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale) {
  const int64_t total = d.n * d.c * d.inner;
  if (total == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(lrn_fwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), static_cast<T*>(dst), static_cast<T*>(scale));
  });
}

void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src) {
  const int64_t total = d.n * d.c * d.inner;
  if (total == 0) return;
  visit_storage(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(lrn_bwd_kernel<T>, dim3(unsigned(grid_for(total))), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), static_cast<const T*>(dst), static_cast<const T*>(scale),
                static_cast<const T*>(diff_dst), static_cast<T*>(diff_src));
  });
}

KILN_CUDA_NAMESPACE_END
