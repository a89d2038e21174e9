#include "kernels/cpu/native/index.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/cpu/ref/index.h"

namespace kiln::native {
namespace {

constexpr int64_t kGrain = 16384;

template <class T>
void gather_t(const GatherDesc& d, const T* src, const int64_t* index, T* dst) {
  const int64_t rows = d.outer * d.idx_n;
  parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(d.inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / d.idx_n, j = row % d.idx_n;
      T* out = dst + row * d.inner;
      const T* base = src + o * d.src_n * d.inner;
      if (d.per_row) {
        std::copy(base + index[j] * d.inner, base + (index[j] + 1) * d.inner, out);
      } else {
        const int64_t* idx = index + row * d.inner;
        for (int64_t i = 0; i < d.inner; ++i) out[i] = base[idx[i] * d.inner + i];
      }
    }
  });
}

template <class T>
void scatter_t(const ScatterDesc& d, const T* src, const int64_t* index, T* dst) {
  // Columns (o, i) are independent; each walks j in order. Blocks of 64 columns of one o keep
  // the inner loop contiguous.
  constexpr int64_t kCols = 64;
  const int64_t blocks = (d.inner + kCols - 1) / kCols;
  parallel_for(0, d.outer * blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(d.idx_n * kCols, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t item = b; item < e; ++item) {
                   const int64_t o = item / blocks, i0 = (item % blocks) * kCols;
                   const int64_t i1 = std::min(d.inner, i0 + kCols);
                   T* base = dst + o * d.dst_n * d.inner;
                   for (int64_t j = 0; j < d.idx_n; ++j) {
                     const T* in = src + (o * d.idx_n + j) * d.inner;
                     for (int64_t i = i0; i < i1; ++i) {
                       const int64_t r = d.per_row ? index[j] : index[(o * d.idx_n + j) * d.inner + i];
                       T& t = base[r * d.inner + i];
                       t = d.accumulate ? ref::accumulate_add(t, in[i]) : in[i];
                     }
                   }
                 }
               });
}

template <class T>
void where_t(const WhereDesc& d, const bool* cond, const T* a, const T* b, T* dst) {
  const StridedLoop& L = d.loop;
  parallel_for(0, L.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    if (L.contiguous()) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dst[i] = cond[i] ? a[i] : b[i];
      return;
    }
    for_each_run(L, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i)
        dst[off[0] + i * st[0]] = cond[off[1] + i * st[1]] ? a[off[2] + i * st[2]] : b[off[3] + i * st[3]];
    });
  });
}

template <class T>
void sort_t(const SortDesc& d, const T* src, T* values, int64_t* indices) {
  parallel_for(0, d.outer * d.inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(d.n, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> order(size_t(d.n));
    for (int64_t col = b; col < e; ++col) {
      const int64_t o = col / d.inner, i = col % d.inner;
      const T* row = src + o * d.n * d.inner + i;
      std::iota(order.begin(), order.end(), int64_t(0));
      // A total order (ties by position), so partial_sort gives what a stable sort would.
      auto before = [&](int64_t x, int64_t y) {
        const auto vx = ref::sort_key(row[x * d.inner]), vy = ref::sort_key(row[y * d.inner]);
        const bool lt = d.descending ? sort_less(vy, vx) : sort_less(vx, vy);
        const bool gt = d.descending ? sort_less(vx, vy) : sort_less(vy, vx);
        return lt || (!gt && x < y);
      };
      if (d.k < d.n)
        std::partial_sort(order.begin(), order.begin() + d.k, order.end(), before);
      else
        std::sort(order.begin(), order.end(), before);
      for (int64_t r = 0; r < d.k; ++r) {
        const int64_t at = (o * d.k + r) * d.inner + i;
        values[at] = row[order[size_t(r)] * d.inner];
        indices[at] = order[size_t(r)];
      }
    }
  });
}

template <class T>
void cumsum_t(const ScanDesc& d, const T* src, T* dst) {
  // Over o, then rows of inner at a time: unit-stride adds.
  parallel_for(0, d.outer, 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* s = src + o * d.n * d.inner;
      T* out = dst + o * d.n * d.inner;
      for (int64_t step = 0; step < d.n; ++step) {
        const int64_t j = d.reverse ? d.n - 1 - step : step;
        const T* in = s + j * d.inner;
        T* cur = out + j * d.inner;
        if (step == 0) {
          std::copy(in, in + d.inner, cur);
          continue;
        }
        const T* prev = out + (d.reverse ? j + 1 : j - 1) * d.inner;
        for (int64_t i = 0; i < d.inner; ++i) cur[i] = ref::accumulate_add(prev[i], in[i]);
      }
    }
  });
}

}  // namespace

void gather(const GatherDesc& d, const void* src, const int64_t* index, void* dst) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    gather_t<T>(d, static_cast<const T*>(src), index, static_cast<T*>(dst));
  });
}

void scatter(const ScatterDesc& d, const void* src, const int64_t* index, void* dst) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    scatter_t<T>(d, static_cast<const T*>(src), index, static_cast<T*>(dst));
  });
}

void where(const WhereDesc& d, const void* cond, const void* a, const void* b, void* dst) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    where_t<T>(d, static_cast<const bool*>(cond), static_cast<const T*>(a), static_cast<const T*>(b),
               static_cast<T*>(dst));
  });
}

bool supports_sort(const SortDesc& d) { return d.dtype != DType::boolean && d.k >= 0 && d.k <= d.n; }

void sort(const SortDesc& d, const void* src, void* values, int64_t* indices) {
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>)
      sort_t<T>(d, static_cast<const T*>(src), static_cast<T*>(values), indices);
  });
}

bool supports_cumsum(const ScanDesc& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::int64;
}

void cumsum(const ScanDesc& d, const void* src, void* dst) {
  if (d.dtype == DType::float32)
    cumsum_t(d, static_cast<const float*>(src), static_cast<float*>(dst));
  else if (d.dtype == DType::float64)
    cumsum_t(d, static_cast<const double*>(src), static_cast<double*>(dst));
  else
    cumsum_t(d, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst));
}

}  // namespace kiln::native
