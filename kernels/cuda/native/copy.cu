// kiln's own CUDA copy, fill, random and index scatter: one thread per element in a grid-stride
// loop over the StridedLoop's linear order; each thread turns its linear index into operand
// offsets (dims are few after coalescing). A contiguous loop skips the index arithmetic.
//   emu test: ctest --test-dir build -R test_copy -L emu
#include "kernels/cuda/native/copy.h"

#include "kernels/cuda/launch.h"
#include "kernels/cuda/native/grid.h"

#include "kernels/common/error.h"
#include "kernels/common/philox.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

using grid::blocks_for;
using grid::kThreads;
using grid::offset_of;

// Half types convert through float, everything else directly (ref::float_or_same's rule).
template <class T> KILN_DEVICE inline T widen(T v) { return v; }
KILN_DEVICE inline float widen(Half v) { return float(v); }
KILN_DEVICE inline float widen(BFloat16 v) { return float(v); }

template <class S, class O>
KILN_GLOBAL void copy_kernel(StridedLoop L, const S* src, O* dst) {
  const int64_t n = L.numel();
  const bool flat = L.contiguous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t od = flat ? i : offset_of(L, 0, i), os = flat ? i : offset_of(L, 1, i);
    dst[od] = O(widen(src[os]));
  }
}

template <class T>
KILN_GLOBAL void fill_kernel(StridedLoop L, T value, T* dst) {
  const int64_t n = L.numel();
  const bool flat = L.contiguous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[flat ? i : offset_of(L, 0, i)] = value;
}

// a + b * u in double without contraction into an FMA, so the device rounds as the host does.
KILN_DEVICE inline double affine(double a, double b, double u) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, __dmul_rn(b, u));
#else
  return a + b * u;
#endif
}

struct RandomArgs {
  RandomKind kind;
  double a, b;
  uint64_t seed, offset;
};

// ref::random_value<double> (kernels/cpu/ref/elementwise.h), narrowed through float as the
// native CPU kernel does.
template <class T>
KILN_GLOBAL void random_kernel(StridedLoop L, RandomArgs r, T* dst) {
  const int64_t n = L.numel();
  const bool flat = L.contiguous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    double v = 0;
    switch (r.kind) {
      case RandomKind::uniform: v = affine(r.a, r.b - r.a, double(philox_uniform(r.seed, r.offset, uint64_t(i)))); break;
      case RandomKind::normal: v = affine(r.a, r.b, double(philox_normal(r.seed, r.offset, uint64_t(i)))); break;
      case RandomKind::bernoulli: v = double(philox_uniform(r.seed, r.offset, uint64_t(i))) < r.a ? 1 : 0; break;
    }
    dst[flat ? i : offset_of(L, 0, i)] = T(float(v));
  }
}

template <class T>
KILN_GLOBAL void index_scatter_kernel(int64_t outer, int64_t reduce, int64_t inner, const T* src, const int64_t* index,
                                      T* dst) {
  const int64_t n = outer * reduce * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in = i % inner, r = (i / inner) % reduce, o = i / (inner * reduce);
    const int64_t s = o * inner + in;
    dst[i] = index[s] == r ? src[s] : T(0.f);
  }
}

bool known(DType t) {
  switch (t) {
    case DType::float32: case DType::float64: case DType::float16: case DType::bfloat16:
    case DType::int32: case DType::int64: case DType::uint8: case DType::boolean: return true;
  }
  return false;
}

void check_loop(const StridedLoop& L, int operands, const char* what) {
  KILN_CHECK(L.ndim >= 0 && L.ndim <= kMaxLoopDims && L.noperands >= operands, "cuda native ", what,
             ": bad loop ", L.str());
}

}  // namespace

bool supports_copy(const CopyDesc& d) { return known(d.src_dtype) && known(d.dst_dtype); }

void copy(const CopyDesc& d, const void* src, void* dst) {
  check_loop(d.loop, 2, "copy");
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  visit_dtype(d.src_dtype, [&](auto s) {
    visit_dtype(d.dst_dtype, [&](auto o) {
      using S = decltype(s);
      using O = decltype(o);
      KILN_LAUNCH((copy_kernel<S, O>), dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d.loop,
                  static_cast<const S*>(src), static_cast<O*>(dst));
    });
  });
}

bool supports_fill(const FillDesc& d) { return known(d.dtype); }

void fill(const FillDesc& d, void* dst) {
  check_loop(d.loop, 1, "fill");
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(fill_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d.loop, T(d.value),
                static_cast<T*>(dst));
  });
}

bool supports_random(const RandomDesc& d) { return known(d.dtype); }

void random(const RandomDesc& d, void* dst) {
  check_loop(d.loop, 1, "random");
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  const RandomArgs r{d.kind, d.a, d.b, d.seed, d.offset};
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(random_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d.loop, r,
                static_cast<T*>(dst));
  });
}

bool supports_index_scatter(const IndexScatterDesc& d) { return known(d.dtype); }

void index_scatter(const IndexScatterDesc& d, const void* src, const int64_t* index, void* dst) {
  const int64_t n = d.outer * d.reduce * d.inner;
  if (n == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH(index_scatter_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d.outer, d.reduce,
                d.inner, static_cast<const T*>(src), index, static_cast<T*>(dst));
  });
}

KILN_CUDA_NAMESPACE_END
