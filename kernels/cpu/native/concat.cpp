// Concat and n-ary sum. See concat.h.
//   ctest --test-dir build -R test_concat_sum
#include "kernels/cpu/native/concat.h"

#include <algorithm>
#include <cstring>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"

namespace kiln::native {
namespace {

template <class T>
void sum_t(const SumDesc& d, const void* const* srcs, void* dst) {
  // 4096 elements (16 KiB in float32) per chunk and input: every operand's chunk stays in L1
  // while the inputs are added.
  constexpr int64_t kChunk = 4096;
  T* out = static_cast<T*>(dst);
  parallel_for(0, (d.n + kChunk - 1) / kChunk, 4, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t j0 = c * kChunk, len = std::min(kChunk, d.n - j0);
      T* o = out + j0;
      const T* a = static_cast<const T*>(srcs[0]) + j0;
      if (d.inputs == 1) {
        if (o != a) std::memcpy(o, a, sizeof(T) * size_t(len));
        continue;
      }
      const T* b = static_cast<const T*>(srcs[1]) + j0;
      for (int64_t j = 0; j < len; ++j) o[j] = a[j] + b[j];
      for (int64_t i = 2; i < d.inputs; ++i) {
        const T* s = static_cast<const T*>(srcs[i]) + j0;
        for (int64_t j = 0; j < len; ++j) o[j] += s[j];
      }
    }
  });
}

}  // namespace

bool supports_concat(const ConcatDesc& d) {
  if (d.outer < 0 || d.inner < 0 || d.sizes.empty()) return false;
  for (int64_t s : d.sizes)
    if (s < 0) return false;
  return true;
}

void concat(const ConcatDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(supports_concat(d), "concat (native): unsupported ", d.str());
  const size_t es = element_size(d.dtype);
  const int64_t k = int64_t(d.sizes.size());
  std::vector<int64_t> col(size_t(k), 0);  // element offset of each input's block in an output row
  for (int64_t i = 1; i < k; ++i) col[size_t(i)] = col[size_t(i - 1)] + d.sizes[size_t(i - 1)] * d.inner;
  const int64_t row = d.total() * d.inner;
  auto* out = static_cast<char*>(dst);
  // Grain: about 32 KiB of copies per task.
  const int64_t avg = std::max<int64_t>(1, row / std::max<int64_t>(k, 1)) * int64_t(es);
  parallel_for(0, d.outer * k, std::max<int64_t>(1, 32768 / avg), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / k, i = t % k;
      const int64_t w = d.sizes[size_t(i)] * d.inner;
      if (w == 0) continue;
      std::memcpy(out + (o * row + col[size_t(i)]) * int64_t(es),
                  static_cast<const char*>(srcs[i]) + o * w * int64_t(es), size_t(w) * es);
    }
  });
}

bool supports_sum(const SumDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64) && d.n >= 0 && d.inputs >= 1;
}

void sum(const SumDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(supports_sum(d), "sum (native): unsupported ", d.str());
  if (d.dtype == DType::float64) sum_t<double>(d, srcs, dst);
  else sum_t<float>(d, srcs, dst);
}

}  // namespace kiln::native
