// concat and n-ary sum on CUDA. See concat.h.
#include "kernels/cuda/native/concat.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/error.h"
#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSumInputs = 8;  // pointers passed by value per launch; more inputs chain launches

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

// One input's [rows, width] block into the output at column `col` of rows `pitch` wide; W is an
// unsigned type of the element's size (the copy moves bits, any dtype).
template <class W>
KILN_GLOBAL void concat_block(int64_t rows, int64_t width, int64_t pitch, int64_t col, const W* src, W* dst) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i - r * width;
    dst[r * pitch + col + c] = src[i];
  }
}

template <class T>
struct SumArgs {
  const T* src[kMaxSumInputs];
  int count;
  bool accumulate;  // dst already holds the sum of the earlier inputs
};

template <class T>
KILN_GLOBAL void sum_kernel(int64_t n, SumArgs<T> a, T* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T acc = a.accumulate ? dst[i] : a.src[0][i];
    for (int k = a.accumulate ? 0 : 1; k < a.count; ++k) acc += a.src[k][i];
    dst[i] = acc;
  }
}

template <class W>
void concat_t(const ConcatDesc& d, const void* const* srcs, void* dst) {
  const int64_t pitch = d.total() * d.inner;
  int64_t col = 0;
  for (size_t i = 0; i < d.sizes.size(); ++i) {
    const int64_t width = d.sizes[i] * d.inner;
    if (width > 0 && d.outer > 0)
      KILN_LAUNCH(concat_block<W>, dim3(blocks_for(d.outer * width)), dim3(kThreads), 0, current_stream(), d.outer,
                  width, pitch, col, static_cast<const W*>(srcs[i]), static_cast<W*>(dst));
    col += width;
  }
}

template <class T>
void sum_t(const SumDesc& d, const void* const* srcs, void* dst) {
  for (int64_t first = 0; first < d.inputs; first += kMaxSumInputs - (first > 0 ? 1 : 0)) {
    SumArgs<T> a{};
    a.accumulate = first > 0;
    a.count = int(std::min<int64_t>(d.inputs - first, a.accumulate ? kMaxSumInputs - 1 : kMaxSumInputs));
    for (int k = 0; k < a.count; ++k) a.src[k] = static_cast<const T*>(srcs[first + k]);
    KILN_LAUNCH(sum_kernel<T>, dim3(blocks_for(d.n)), dim3(kThreads), 0, current_stream(), d.n, a,
                static_cast<T*>(dst));
    if (a.count == 0) break;
  }
}

}  // namespace

bool supports_concat(const ConcatDesc& d) {
  if (d.outer < 0 || d.inner < 0 || d.sizes.empty()) return false;
  for (int64_t s : d.sizes)
    if (s < 0) return false;
  const size_t es = element_size(d.dtype);
  return es == 1 || es == 2 || es == 4 || es == 8;
}

void concat(const ConcatDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(supports_concat(d), "concat (cuda): unsupported ", d.str());
  switch (element_size(d.dtype)) {
    case 1: concat_t<uint8_t>(d, srcs, dst); break;
    case 2: concat_t<uint16_t>(d, srcs, dst); break;
    case 4: concat_t<uint32_t>(d, srcs, dst); break;
    default: concat_t<uint64_t>(d, srcs, dst); break;
  }
}

bool supports_sum(const SumDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64) && d.n >= 0 && d.inputs >= 1;
}

void sum(const SumDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(supports_sum(d), "sum (cuda): unsupported ", d.str());
  if (d.n == 0) return;
  if (d.dtype == DType::float64) sum_t<double>(d, srcs, dst);
  else sum_t<float>(d, srcs, dst);
}

KILN_CUDA_NAMESPACE_END
