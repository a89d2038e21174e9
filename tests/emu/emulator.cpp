// Self-tests of the CUDA emulator (kernels/cuda/emu/): built-in variables over 2-d/3-d grids,
// static and dynamic shared memory, barriers, every shuffle, ballot/any/all, atomics, the launch
// checks, and (printed) the fiber switch rate. Run: ctest --test-dir build -R emu.emulator
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "kernels/cuda/launch.h"
#include "tests/support/testing.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace emu_test {

KILN_GLOBAL void write_ids(int* out) {
  const unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  out[bx * nt + tx] = int(bx * 1000 + tx);
}

// Reverses each block's slice through static shared memory.
KILN_GLOBAL void reverse_block(const float* src, float* dst) {
  KILN_SHARED float buf[256];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = src[i];
  __syncthreads();
  dst[i] = buf[blockDim.x - 1 - threadIdx.x];
}

// The same through dynamic shared memory of blockDim.x floats.
KILN_GLOBAL void reverse_dynamic(const float* src, float* dst) {
  KILN_DYNAMIC_SHARED(float, buf);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = src[i];
  __syncthreads();
  dst[i] = buf[blockDim.x - 1 - threadIdx.x];
}

KILN_GLOBAL void shuffles(const int* src, int* dst) {
  const int t = int(threadIdx.x);
  const int v = src[t];
  const unsigned full = 0xffffffffu;
  dst[0 * 64 + t] = __shfl_sync(full, v, 5);
  dst[1 * 64 + t] = __shfl_up_sync(full, v, 3);
  dst[2 * 64 + t] = __shfl_down_sync(full, v, 3);
  dst[3 * 64 + t] = __shfl_xor_sync(full, v, 1);
  dst[4 * 64 + t] = __shfl_down_sync(full, v, 2, 8);  // segments of 8 lanes
  dst[5 * 64 + t] = int(__ballot_sync(full, v % 3 == 0));
  dst[6 * 64 + t] = __any_sync(full, v == 40);
  dst[7 * 64 + t] = __all_sync(full, v >= 0);
  dst[8 * 64 + t] = int(__shfl_sync(full, float(v) * 0.5f, t ^ 31) * 2.0f);
  __syncwarp();
}

// Lanes 0..15 and 16..31 shuffle within their own half-warp masks, in different branches.
KILN_GLOBAL void half_masks(int* dst) {
  const int lane = int(threadIdx.x) & 31;
  if (lane < 16)
    dst[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, lane, 1);
  else
    dst[threadIdx.x] = __shfl_xor_sync(0xffff0000u, lane, 2);
}

KILN_GLOBAL void atomics(int* i, unsigned* u, unsigned long long* ull, float* f, double* d) {
  atomicAdd(&i[0], 1);
  atomicAdd(&u[0], 2u);
  atomicAdd(&ull[0], 3ull);
  atomicAdd(&f[0], 0.5f);
  atomicAdd(&d[0], 0.25);
  atomicMax(&i[1], int(threadIdx.x));
  atomicMin(&i[2], -int(threadIdx.x));
  atomicMax(&u[1], threadIdx.x * 2u);
  atomicMin(&u[2], threadIdx.x + 5u);
  // A CAS loop building a float max, as kernels do for types without a native atomic.
  int* fi = reinterpret_cast<int*>(&f[1]);
  int old = *fi;
  for (;;) {
    const float want = max(__int_as_float(old), float(threadIdx.x) * 1.5f);
    const int seen = atomicCAS(fi, old, __float_as_int(want));
    if (seen == old) break;
    old = seen;
  }
  if (threadIdx.x == 7) atomicExch(&i[3], 42);
}

KILN_GLOBAL void early_exit_then_barrier(float* dst) {
  if (threadIdx.x == 3) return;
  __syncthreads();
  dst[threadIdx.x] = 1;
}

KILN_GLOBAL void two_barriers(float* dst) {
  if (threadIdx.x < 8) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  dst[threadIdx.x] = 1;
}

KILN_GLOBAL void shuffle_missing_lane(int* dst) {
  if (threadIdx.x == 9) return;
  dst[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 0);
}

KILN_GLOBAL void throws_in_kernel(int* dst) {
  KILN_CHECK(threadIdx.x != 5, "thread five says no");
  __syncthreads();
  dst[threadIdx.x] = 1;
}

KILN_GLOBAL void ping(int rounds, int* dst) {
  int acc = 0;
  for (int r = 0; r < rounds; ++r) {
    __syncthreads();
    ++acc;
  }
  dst[threadIdx.x] = acc;
}

}  // namespace emu_test
KILN_CUDA_NAMESPACE_END

using namespace kiln::cuda;
using namespace kiln::cuda::emu_test;

TEST_CASE("emu: threadIdx/blockIdx over 1-d, 2-d and 3-d grids") {
  const dim3 grids[] = {dim3(3), dim3(2, 3), dim3(2, 2, 3)};
  const dim3 blocks[] = {dim3(5), dim3(4, 3), dim3(2, 3, 4)};
  for (int c = 0; c < 3; ++c) {
    const dim3 g = grids[c], b = blocks[c];
    const int nb = int(g.x * g.y * g.z), nt = int(b.x * b.y * b.z);
    std::vector<int> out(size_t(nb * nt), -1);
    launch(write_ids, g, b, 0, current_stream(), out.data());
    for (int k = 0; k < nb; ++k)
      for (int t = 0; t < nt; ++t) REQUIRE(out[size_t(k * nt + t)] == k * 1000 + t);
  }
}

TEST_CASE("emu: static and dynamic shared memory with barriers") {
  const int nb = 3, nt = 256;
  std::vector<float> src(nb * nt), a(nb * nt), b(nb * nt);
  std::iota(src.begin(), src.end(), 0.0f);
  KILN_LAUNCH(reverse_block, dim3(nb), dim3(nt), 0, current_stream(), src.data(), a.data());
  KILN_LAUNCH(reverse_dynamic, dim3(nb), dim3(nt), nt * sizeof(float), current_stream(), src.data(), b.data());
  for (int k = 0; k < nb; ++k)
    for (int t = 0; t < nt; ++t) {
      CHECK(a[size_t(k * nt + t)] == src[size_t(k * nt + nt - 1 - t)]);
      CHECK(b[size_t(k * nt + t)] == src[size_t(k * nt + nt - 1 - t)]);
    }
}

TEST_CASE("emu: shuffles, ballot, any, all") {
  std::vector<int> src(64), dst(9 * 64, -1);
  for (int t = 0; t < 64; ++t) src[size_t(t)] = t * 7 % 64;  // warp 1 holds other values than warp 0
  launch(shuffles, dim3(1), dim3(64), 0, current_stream(), src.data(), dst.data());
  for (int t = 0; t < 64; ++t) {
    const int w = t / 32 * 32, l = t % 32;
    INFO("thread ", t);
    CHECK(dst[size_t(0 * 64 + t)] == src[size_t(w + 5)]);
    CHECK(dst[size_t(1 * 64 + t)] == (l >= 3 ? src[size_t(t - 3)] : src[size_t(t)]));
    CHECK(dst[size_t(2 * 64 + t)] == (l + 3 < 32 ? src[size_t(t + 3)] : src[size_t(t)]));
    CHECK(dst[size_t(3 * 64 + t)] == src[size_t(t ^ 1)]);
    CHECK(dst[size_t(4 * 64 + t)] == (l % 8 + 2 < 8 ? src[size_t(t + 2)] : src[size_t(t)]));
    unsigned ballot = 0;
    bool any = false, all = true;
    for (int k = 0; k < 32; ++k) {
      ballot |= unsigned(src[size_t(w + k)] % 3 == 0) << k;
      any = any || src[size_t(w + k)] == 40;
      all = all && src[size_t(w + k)] >= 0;
    }
    CHECK(unsigned(dst[size_t(5 * 64 + t)]) == ballot);
    CHECK(dst[size_t(6 * 64 + t)] == int(any));
    CHECK(dst[size_t(7 * 64 + t)] == int(all));
    CHECK(dst[size_t(8 * 64 + t)] == src[size_t(w + (l ^ 31))]);
  }
  std::vector<int> half(32);
  launch(half_masks, dim3(1), dim3(32), 0, current_stream(), half.data());
  for (int l = 0; l < 32; ++l) CHECK(half[size_t(l)] == (l < 16 ? l ^ 1 : l ^ 2));
}

TEST_CASE("emu: atomics") {
  int i[4] = {0, -100, 100, 0};
  unsigned u[3] = {0, 0, 1000};
  unsigned long long ull = 0;
  float f[2] = {0, -1};
  double d = 0;
  launch(atomics, dim3(2), dim3(96), 0, current_stream(), i, u, &ull, f, &d);
  CHECK(i[0] == 192);
  CHECK(i[1] == 95);
  CHECK(i[2] == -95);
  CHECK(i[3] == 42);
  CHECK(u[0] == 384u);
  CHECK(u[1] == 190u);
  CHECK(u[2] == 5u);
  CHECK(ull == 576ull);
  CHECK(f[0] == 96.0f);
  CHECK(f[1] == 95 * 1.5f);
  CHECK(d == 48.0);
}

TEST_CASE("emu: barrier divergence, missing lanes and kernel errors name kernel, block and thread") {
  std::vector<float> f(64);
  std::vector<int> n(64);
  CHECK_THROWS_KILN(KILN_LAUNCH(early_exit_then_barrier, dim3(2), dim3(32), 0, current_stream(), f.data()),
                    "kernel 'early_exit_then_barrier' block (0,0,0) thread (3,0,0): barrier divergence: exited");
  CHECK_THROWS_KILN(KILN_LAUNCH(two_barriers, dim3(1), dim3(32), 0, current_stream(), f.data()),
                    "barrier divergence: waits at __syncthreads");
  CHECK_THROWS_KILN(KILN_LAUNCH(shuffle_missing_lane, dim3(1), dim3(32), 0, current_stream(), n.data()),
                    "__shfl_sync at mask 0xffffffff: lane 9 never arrives (exited)");
  CHECK_THROWS_KILN(KILN_LAUNCH(throws_in_kernel, dim3(1), dim3(32), 0, current_stream(), n.data()),
                    "thread (5,0,0): thread five says no");
  // After abandoned blocks the emulator still runs kernels correctly.
  std::vector<int> out(64, 0);
  launch(ping, dim3(1), dim3(64), 0, current_stream(), 3, out.data());
  for (int v : out) CHECK(v == 3);
}

TEST_CASE("emu: launch bounds") {
  std::vector<int> out(2048);
  CHECK_THROWS_KILN(KILN_LAUNCH(write_ids, dim3(1), dim3(1025), 0, current_stream(), out.data()),
                    "launch of kernel 'write_ids': block (1025,1,1) exceeds the launch bounds");
  CHECK_THROWS_KILN(KILN_LAUNCH(write_ids, dim3(1), dim3(32, 1, 65), 0, current_stream(), out.data()),
                    "exceeds the launch bounds");
  CHECK_THROWS_KILN(KILN_LAUNCH(write_ids, dim3(1, 70000), dim3(1), 0, current_stream(), out.data()),
                    "grid (1,70000,1) exceeds the launch bounds");
  CHECK_THROWS_KILN(KILN_LAUNCH(reverse_dynamic, dim3(1), dim3(32), 49 * 1024, current_stream(), nullptr, nullptr),
                    "50176 bytes of dynamic shared memory exceed the 49152 allowed");
  set_max_dynamic_shared(reverse_dynamic, 64 * 1024);
  std::vector<float> src(32, 1.0f), dst(32);
  KILN_LAUNCH(reverse_dynamic, dim3(1), dim3(32), 49 * 1024, current_stream(), src.data(), dst.data());
  CHECK(dst[0] == 1.0f);
}

// The rate is printed for information only (tests assert values, not timings; under CI load it
// varies tenfold).
TEST_CASE("emu: 2000 barrier rounds of a 256-thread block") {
  const int rounds = 2000;
  std::vector<int> out(256);
  const auto t0 = std::chrono::steady_clock::now();
  launch(ping, dim3(1), dim3(256), 0, current_stream(), rounds, out.data());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Each barrier round switches into and out of every thread.
  const double rate = 2.0 * 256 * (rounds + 1) / s;
  std::printf("emu: %.2f million fiber switches per second (256 threads, %d barriers, %.3f s)\n", rate / 1e6, rounds, s);
  CHECK(out[255] == rounds);
}
