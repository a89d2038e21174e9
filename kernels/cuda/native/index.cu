// kiln's own CUDA indexing kernels; see index.h.
#include "kernels/cuda/native/index.h"

#include <type_traits>

#include "kernels/common/error.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/native/grid.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

using grid::blocks_for;
using grid::kThreads;
using grid::offset_of;

#define KILN_GRID_LOOP(i, n)                                                                      \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, step_ = int64_t(gridDim.x) * blockDim.x; \
       i < (n); i += step_)

template <class T>
KILN_GLOBAL void gather_kernel(GatherDesc d, const T* src, const int64_t* index, T* dst) {
  const int64_t n = d.outer * d.idx_n * d.inner;
  KILN_GRID_LOOP(k, n) {
    const int64_t i = k % d.inner, row = k / d.inner;
    const int64_t o = row / d.idx_n, j = row % d.idx_n;
    const int64_t r = d.per_row ? index[j] : index[k];
    dst[k] = src[(o * d.src_n + r) * d.inner + i];
  }
}

template <class T>
KILN_GLOBAL void scatter_kernel(ScatterDesc d, const T* src, const int64_t* index, T* dst) {
  const int64_t cols = d.outer * d.inner;
  KILN_GRID_LOOP(c, cols) {
    const int64_t o = c / d.inner, i = c % d.inner;
    for (int64_t j = 0; j < d.idx_n; ++j) {
      const int64_t at = (o * d.idx_n + j) * d.inner + i;
      const int64_t r = d.per_row ? index[j] : index[at];
      T& t = dst[(o * d.dst_n + r) * d.inner + i];
      t = d.accumulate ? fn::accumulate_add(t, src[at]) : src[at];
    }
  }
}

template <class T>
KILN_GLOBAL void where_kernel(WhereDesc d, const bool* cond, const T* a, const T* b, T* dst) {
  const int64_t n = d.loop.numel();
  KILN_GRID_LOOP(k, n) {
    dst[offset_of(d.loop, 0, k)] = cond[offset_of(d.loop, 1, k)] ? a[offset_of(d.loop, 2, k)] : b[offset_of(d.loop, 3, k)];
  }
}

// Element j of column (o, i) goes to output position rank(j) when that is below k.
template <class T>
KILN_GLOBAL void sort_kernel(SortDesc d, const T* src, T* values, int64_t* indices) {
  const int64_t total = d.outer * d.n * d.inner;
  KILN_GRID_LOOP(k, total) {
    const int64_t i = k % d.inner, row = k / d.inner;
    const int64_t o = row / d.n, j = row % d.n;
    const T* col = src + o * d.n * d.inner + i;
    const auto v = fn::sort_key(col[j * d.inner]);
    int64_t rank = 0;
    for (int64_t m = 0; m < d.n; ++m) {
      if (m == j) continue;
      const auto w = fn::sort_key(col[m * d.inner]);
      const bool before = d.descending ? sort_less(v, w) : sort_less(w, v);  // w sorts before v
      const bool after = d.descending ? sort_less(w, v) : sort_less(v, w);
      if (before || (!after && m < j)) ++rank;
    }
    if (rank < d.k) {
      const int64_t at = (o * d.k + rank) * d.inner + i;
      values[at] = col[j * d.inner];
      indices[at] = j;
    }
  }
}

template <class T>
KILN_GLOBAL void cumsum_kernel(ScanDesc d, const T* src, T* dst) {
  const int64_t cols = d.outer * d.inner;
  KILN_GRID_LOOP(c, cols) {
    const int64_t o = c / d.inner, i = c % d.inner;
    T acc = T(0);
    for (int64_t s = 0; s < d.n; ++s) {
      const int64_t j = d.reverse ? d.n - 1 - s : s;
      const int64_t at = (o * d.n + j) * d.inner + i;
      acc = fn::accumulate_add(acc, src[at]);
      dst[at] = acc;
    }
  }
}

#undef KILN_GRID_LOOP

}  // namespace

void gather(const GatherDesc& d, const void* src, const int64_t* index, void* dst) {
  const int64_t n = d.outer * d.idx_n * d.inner;
  if (n == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH((gather_kernel<T>), dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), index, static_cast<T*>(dst));
  });
}

void scatter(const ScatterDesc& d, const void* src, const int64_t* index, void* dst) {
  const int64_t cols = d.outer * d.inner;
  if (cols == 0 || d.idx_n == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH((scatter_kernel<T>), dim3(blocks_for(cols)), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), index, static_cast<T*>(dst));
  });
}

void where(const WhereDesc& d, const void* cond, const void* a, const void* b, void* dst) {
  const int64_t n = d.loop.numel();
  if (n == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH((where_kernel<T>), dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d,
                static_cast<const bool*>(cond), static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(dst));
  });
}

bool supports_sort(const SortDesc& d) { return d.dtype != DType::boolean && d.k >= 0 && d.k <= d.n; }

void sort(const SortDesc& d, const void* src, void* values, int64_t* indices) {
  const int64_t n = d.outer * d.n * d.inner;
  if (n == 0 || d.k == 0) return;
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, bool>::value)
      KILN_LAUNCH((sort_kernel<T>), dim3(blocks_for(n)), dim3(kThreads), 0, current_stream(), d,
                  static_cast<const T*>(src), static_cast<T*>(values), indices);
  });
}

bool supports_cumsum(const ScanDesc& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::int64;
}

void cumsum(const ScanDesc& d, const void* src, void* dst) {
  const int64_t cols = d.outer * d.inner;
  if (cols == 0 || d.n == 0) return;
  auto launch = [&](auto t) {
    using T = decltype(t);
    KILN_LAUNCH((cumsum_kernel<T>), dim3(blocks_for(cols)), dim3(kThreads), 0, current_stream(), d,
                static_cast<const T*>(src), static_cast<T*>(dst));
  };
  if (d.dtype == DType::float32) launch(float{});
  else if (d.dtype == DType::float64) launch(double{});
  else launch(int64_t{});
}

KILN_CUDA_NAMESPACE_END
