#include "kernels/cpu/native/reduce.h"

#include <cstring>

#include "kernels/common/parallel.h"

namespace kiln::native {
namespace {

template <class T>
T sum_strided(const T* s, int64_t n, int64_t stride) {
  if (stride == 1) {
    T part[8] = {};
    int64_t r = 0;
    for (; r + 8 <= n; r += 8)
      for (int k = 0; k < 8; ++k) part[k] += s[r + k];
    T acc = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    for (; r < n; ++r) acc += s[r];
    return acc;
  }
  T acc = 0;
  for (int64_t r = 0; r < n; ++r) acc += s[r * stride];
  return acc;
}

template <class T>
void reduce_t(const ReduceDesc& d, const T* src, T* dst, int64_t* index) {
  const int64_t nout = d.outer * d.inner;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.reduce));
  if (d.inner > 1 && (d.op == ReduceOp::sum || d.op == ReduceOp::mean)) {
    // Sum rows of [reduce, inner] into a vector: unit-stride adds over inner.
    parallel_for(0, d.outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        T* out = dst + o * d.inner;
        const T* s = src + o * d.reduce * d.inner;
        for (int64_t i = 0; i < d.inner; ++i) out[i] = s[i];
        for (int64_t r = 1; r < d.reduce; ++r) {
          const T* row = s + r * d.inner;
#pragma omp simd
          for (int64_t i = 0; i < d.inner; ++i) out[i] += row[i];
        }
        if (d.op == ReduceOp::mean)
          for (int64_t i = 0; i < d.inner; ++i) out[i] /= T(d.reduce);
      }
    });
    return;
  }
  parallel_for(0, nout, grain, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / d.inner, i = k % d.inner;
      const T* s = src + o * d.reduce * d.inner + i;
      if (d.op == ReduceOp::sum || d.op == ReduceOp::mean) {
        T acc = sum_strided(s, d.reduce, d.inner);
        dst[k] = d.op == ReduceOp::mean ? acc / T(d.reduce) : acc;
        continue;
      }
      T acc = s[0];
      int64_t best = 0;
      const bool is_max = d.op == ReduceOp::max;
      for (int64_t r = 1; r < d.reduce && acc == acc; ++r) {
        T v = s[r * d.inner];
        if (v != v || (is_max ? v > acc : v < acc)) { acc = v; best = r; }  // NaN wins, like PyTorch
      }
      dst[k] = acc;
      if (index) index[k] = best;
    }
  });
}

}  // namespace

// int64: the sums, maxima and minima of integer and boolean tensors (the op widens them first).
bool supports_reduce(const ReduceDesc& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64 || (d.dtype == DType::int64 && d.op != ReduceOp::mean);
}

void reduce(const ReduceDesc& d, const void* src, void* dst, int64_t* index) {
  if (d.dtype == DType::float32)
    reduce_t(d, static_cast<const float*>(src), static_cast<float*>(dst), index);
  else if (d.dtype == DType::int64)
    reduce_t(d, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst), index);
  else
    reduce_t(d, static_cast<const double*>(src), static_cast<double*>(dst), index);
}

void index_scatter(const IndexScatterDesc& d, const void* src, const int64_t* index, void* dst) {
  const size_t es = element_size(d.dtype);
  std::memset(dst, 0, es * size_t(d.outer * d.reduce * d.inner));
  visit_dtype(d.dtype, [&](auto t) {
    using T = decltype(t);
    const T* s = static_cast<const T*>(src);
    T* o = static_cast<T*>(dst);
    parallel_for(0, d.outer, 64, [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q)
        for (int64_t i = 0; i < d.inner; ++i)
          o[(q * d.reduce + index[q * d.inner + i]) * d.inner + i] = s[q * d.inner + i];
    });
  });
}

}  // namespace kiln::native
