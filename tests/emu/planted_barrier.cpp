// Planted bug (a): a shared-memory tile transpose with its __syncthreads() removed. Under the
// emulator each thread runs to the barrier (or its end) before the next starts, so without the
// barrier thread 0 reads tile entries no other thread has written yet: the result must differ
// from the CPU reference, while the correct kernel matches it exactly. Barrier divergence in the
// same kernel raises kiln::Error. Run: ctest --test-dir build -R emu.planted_barrier
#include <doctest/doctest.h>

#include <vector>

#include "kernels/cuda/launch.h"
#include "tests/support/testing.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace planted {

constexpr int kTile = 32;

// dst[c, r] = src[r, c] for a rows x cols matrix, through a 32x33 tile (padded against bank
// conflicts); blocks of 32x8 threads, each thread moves 4 elements.
template <bool kBarrier, bool kDiverge>
KILN_GLOBAL void transpose(const float* src, float* dst, int rows, int cols) {
  KILN_SHARED float tile[kTile][kTile + 1];
  const int c0 = int(blockIdx.x) * kTile, r0 = int(blockIdx.y) * kTile;
  for (int k = int(threadIdx.y); k < kTile; k += int(blockDim.y)) {
    const int r = r0 + k, c = c0 + int(threadIdx.x);
    if (r < rows && c < cols) tile[k][threadIdx.x] = src[r * cols + c];
  }
  if (kDiverge && threadIdx.x == 0 && threadIdx.y == 1) return;  // a thread leaves before the barrier
  if (kBarrier) __syncthreads();
  for (int k = int(threadIdx.y); k < kTile; k += int(blockDim.y)) {
    const int c = c0 + k, r = r0 + int(threadIdx.x);
    if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][k];
  }
}

}  // namespace planted
KILN_CUDA_NAMESPACE_END

namespace {

using kiln::cuda::dim3;

std::vector<float> run(void (*kernel)(const float*, float*, int, int), int rows, int cols) {
  std::vector<float> src(size_t(rows * cols)), dst(size_t(rows * cols), -1.0f);
  for (int i = 0; i < rows * cols; ++i) src[size_t(i)] = float(i);
  const dim3 grid(unsigned((cols + 31) / 32), unsigned((rows + 31) / 32)), block(32, 8);
  kiln::cuda::launch(kernel, grid, block, 0, kiln::cuda::current_stream(), src.data(), dst.data(), rows, cols);
  return dst;
}

std::vector<float> reference(int rows, int cols) {
  std::vector<float> dst(size_t(rows * cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) dst[size_t(c * rows + r)] = float(r * cols + c);
  return dst;
}

}  // namespace

TEST_CASE("emu planted bug: a transpose without __syncthreads() gives a wrong answer") {
  // 20x30 is a single block: its tile starts with what the previous launch left there.
  for (const std::pair<int, int> rc : {std::pair<int, int>{33, 70}, {64, 64}, {7, 100}, {20, 30}}) {
    const int rows = rc.first, cols = rc.second;
    INFO(rows, "x", cols);
    CHECK(run(kiln::cuda::planted::transpose<true, false>, rows, cols) == reference(rows, cols));
    CHECK(run(kiln::cuda::planted::transpose<false, false>, rows, cols) != reference(rows, cols));
  }
}

TEST_CASE("emu planted bug: a thread leaving before the barrier is barrier divergence") {
  CHECK_THROWS_KILN(run(kiln::cuda::planted::transpose<true, true>, 33, 70),
                    "block (0,0,0) thread (0,1,0): barrier divergence: exited while other threads wait at __syncthreads");
}
