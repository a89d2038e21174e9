// kiln's own CUDA reductions (see reduce.h). Two kernels, each used for both passes:
//   reduce_rows (inner == 1): a 256-thread block sums one chunk of a row: strided per-thread
//     sums, then warp shuffles, then the warps' sums through shared memory;
//   reduce_cols (inner > 1): a 32x8 block covers 32 adjacent outputs (coalesced), 8 threads per
//     output split the chunk, their sums added through shared memory in a fixed order.
// Pass one writes partial sums [outer, chunks(, inner)] to scratch; pass two reduces the chunks
// (and divides for mean). Short axes take one pass straight into dst.
// max and min (with the index of the chosen element, for argmax and the backward pass): one
// thread per output walks the axis in order, so the first NaN, else the first extreme, wins, as
// in the ref kernels and PyTorch (found missing when the emulated device ran the GPU op cases).
// Test: ctest --test-dir build -R emu.reduce
#include "kernels/cuda/native/reduce.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace reduce_detail {

constexpr int kRowThreads = 256;
constexpr int kColX = 32, kColY = 8;
constexpr int64_t kRowChunk = 4096;   // elements a block sums in pass one along a row
constexpr int64_t kColChunk = 256;    // rows of the reduced axis a block sums in pass one
constexpr int64_t kMaxChunks = 1024;  // so pass two is one short reduction per output
constexpr int64_t kTargetBlocks = 1024;

template <class T>
KILN_DEVICE KILN_FORCEINLINE T warp_sum(T v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// dst[o * nchunks + c] = sum of src[o * len + r] over r in chunk c; divided by `divisor`.
template <class T>
KILN_GLOBAL void __launch_bounds__(kRowThreads) reduce_rows(const T* __restrict__ src, T* __restrict__ dst,
                                                            int64_t outer, int64_t len, int64_t chunk, T divisor) {
  KILN_SHARED T warp_sums[kRowThreads / 32];
  const int64_t nchunks = gridDim.x;
  const int64_t c = blockIdx.x;
  const int64_t begin = c * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    const T* row = src + o * len;
    T acc = T(0);
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) acc += row[r];
    acc = warp_sum(acc);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      T v = lane < blockDim.x / 32 ? warp_sums[lane] : T(0);
      v = warp_sum(v);
      if (lane == 0) dst[o * nchunks + c] = v / divisor;
    }
    __syncthreads();  // warp_sums is rewritten for the next row
  }
}

// dst[(o * nchunks + c) * inner + i] = sum of src[(o * len + r) * inner + i] over r in chunk c.
template <class T>
KILN_GLOBAL void __launch_bounds__(kColX * kColY) reduce_cols(const T* __restrict__ src, T* __restrict__ dst,
                                                              int64_t outer, int64_t len, int64_t inner,
                                                              int64_t chunk, T divisor) {
  KILN_SHARED T part[kColY][kColX + 1];
  const int64_t nchunks = gridDim.y;
  const int64_t c = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * kColX + threadIdx.x;
  const int64_t begin = c * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    T acc = T(0);
    if (i < inner)
      for (int64_t r = begin + threadIdx.y; r < end; r += kColY) acc += src[(o * len + r) * inner + i];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      T v = part[0][threadIdx.x];
      for (int k = 1; k < kColY; ++k) v += part[k][threadIdx.x];
      dst[(o * nchunks + c) * inner + i] = v / divisor;
    }
    __syncthreads();
  }
}

template <class T>
KILN_GLOBAL void reduce_extreme(const T* __restrict__ src, T* __restrict__ dst, int64_t* __restrict__ index,
                                int64_t outer, int64_t len, int64_t inner, bool is_max) {
  const int64_t total = outer * inner;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    const T* p = src + o * len * inner + i;
    T best = p[0];
    int64_t at = 0;
    for (int64_t r = 1; r < len && best == best; ++r) {
      const T v = p[r * inner];
      if (v != v || (is_max ? v > best : v < best)) {
        best = v;
        at = r;
      }
    }
    dst[t] = best;
    if (index) index[t] = at;
  }
}

template <class T>
void reduce_extreme_t(const ReduceDesc& d, const T* src, T* dst, int64_t* index) {
  constexpr int64_t kThreads = 256;
  const int64_t total = d.outer * d.inner;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  blocks = std::max<int64_t>(1, std::min<int64_t>(blocks, KILN_GRID_STRIDE_CAP(65535)));
  KILN_LAUNCH(reduce_extreme<T>, dim3(unsigned(blocks)), dim3(unsigned(kThreads)), 0, current_stream(), src, dst, index,
              d.outer, d.reduce, d.inner, d.op == ReduceOp::max);
}

template <class T>
void reduce_t(const ReduceDesc& d, const T* src, T* dst) {
  const Stream s = current_stream();
  // Dividing by 1 is exact, so sums and the first pass share the final division.
  const T divisor = d.op == ReduceOp::mean ? T(d.reduce) : T(1);
  const unsigned gy = unsigned(std::min<int64_t>(d.outer, 65535));
  if (d.inner == 1) {
    // Enough chunks per row to fill the GPU when there are few rows.
    int64_t nchunks = (d.reduce + kRowChunk - 1) / kRowChunk;
    nchunks = std::max<int64_t>(1, std::min({nchunks, kMaxChunks, std::max<int64_t>(1, kTargetBlocks / d.outer)}));
    if (nchunks == 1) {
      KILN_LAUNCH(reduce_rows<T>, dim3(1, gy), dim3(kRowThreads), 0, s, src, dst, d.outer, d.reduce, d.reduce, divisor);
      return;
    }
    const int64_t chunk = (d.reduce + nchunks - 1) / nchunks;
    nchunks = (d.reduce + chunk - 1) / chunk;
    Scratch partial(sizeof(T) * size_t(d.outer * nchunks), s);
    KILN_LAUNCH(reduce_rows<T>, dim3(unsigned(nchunks), gy), dim3(kRowThreads), 0, s, src, partial.as<T>(), d.outer,
                d.reduce, chunk, T(1));
    KILN_LAUNCH(reduce_rows<T>, dim3(1, gy), dim3(kRowThreads), 0, s, static_cast<const T*>(partial.as<T>()), dst,
                d.outer, nchunks, nchunks, divisor);
    return;
  }
  const int64_t gx = (d.inner + kColX - 1) / kColX;
  KILN_CHECK(gx <= 0x7fffffff, "cuda reduce: inner ", d.inner, " too large");
  const unsigned gz = gy;
  int64_t nchunks = (d.reduce + kColChunk - 1) / kColChunk;
  nchunks = std::max<int64_t>(1, std::min({nchunks, kMaxChunks, std::max<int64_t>(1, kTargetBlocks / (gx * d.outer))}));
  if (nchunks == 1) {
    KILN_LAUNCH(reduce_cols<T>, dim3(unsigned(gx), 1, gz), dim3(kColX, kColY), 0, s, src, dst, d.outer, d.reduce,
                d.inner, d.reduce, divisor);
    return;
  }
  const int64_t chunk = (d.reduce + nchunks - 1) / nchunks;
  nchunks = (d.reduce + chunk - 1) / chunk;
  Scratch partial(sizeof(T) * size_t(d.outer * nchunks * d.inner), s);
  KILN_LAUNCH(reduce_cols<T>, dim3(unsigned(gx), unsigned(nchunks), gz), dim3(kColX, kColY), 0, s, src,
              partial.as<T>(), d.outer, d.reduce, d.inner, chunk, T(1));
  KILN_LAUNCH(reduce_cols<T>, dim3(unsigned(gx), 1, gz), dim3(kColX, kColY), 0, s,
              static_cast<const T*>(partial.as<T>()), dst, d.outer, nchunks, d.inner, nchunks, divisor);
}

}  // namespace reduce_detail

// int64: the sums, maxima and minima of integer and boolean tensors (the op widens them first).
bool supports_reduce(const ReduceDesc& d) {
  const bool extreme = d.op == ReduceOp::max || d.op == ReduceOp::min;
  return (extreme || !d.want_index) &&
         (d.dtype == DType::float32 || d.dtype == DType::float64 || (d.dtype == DType::int64 && d.op != ReduceOp::mean));
}

void reduce(const ReduceDesc& d, const void* src, void* dst, int64_t* index) {
  KILN_CHECK(supports_reduce(d) && (index == nullptr || d.want_index), "cuda reduce: not supported: ", d.str());
  if (d.outer * d.inner == 0) return;
  if (d.op == ReduceOp::max || d.op == ReduceOp::min) {
    KILN_CHECK(d.reduce > 0, "cuda reduce: ", d.str(), ": max/min over an empty axis");
    if (d.dtype == DType::float32)
      reduce_detail::reduce_extreme_t(d, static_cast<const float*>(src), static_cast<float*>(dst), index);
    else if (d.dtype == DType::int64)
      reduce_detail::reduce_extreme_t(d, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst), index);
    else
      reduce_detail::reduce_extreme_t(d, static_cast<const double*>(src), static_cast<double*>(dst), index);
    return;
  }
  if (d.dtype == DType::float32)
    reduce_detail::reduce_t(d, static_cast<const float*>(src), static_cast<float*>(dst));
  else if (d.dtype == DType::int64)
    reduce_detail::reduce_t(d, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst));
  else
    reduce_detail::reduce_t(d, static_cast<const double*>(src), static_cast<double*>(dst));
}

KILN_CUDA_NAMESPACE_END
