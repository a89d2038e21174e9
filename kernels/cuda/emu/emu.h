// An emulator of the CUDA execution model, so kiln's own CUDA kernels (kernels/cuda/native/*.cu)
// also compile as plain C++17 and run in CI without a GPU (docs/architecture.md, "GPU code without
// a GPU in CI"). Included by kernels/cuda/launch.h when KILN_CUDA_EMU is defined; never directly.
//
// Blocks of a grid run one after another; each thread of a block is a fiber that runs until it
// reaches __syncthreads(), a warp collective or its end, then the next thread runs. So in
// load-then-use code with a missing barrier, thread 0 uses what the other threads have not yet
// written and the result comes out wrong. Barrier divergence and warp collectives whose lanes
// do not all arrive are reported as kiln::Error naming the kernel, block and thread.
// One OS thread runs a grid; launches on several OS threads at once are fine unless they share a
// kernel with static shared memory (one copy per process, as KILN_SHARED is a static).
// Emulated device memory is host memory: built with AddressSanitizer, the kernels' out-of-bounds
// accesses are caught (tests/emu/planted_oob.cpp). Test: ctest --test-dir build -L emu
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/host_device.h"
#include "kernels/cuda/namespace.h"

// CUDA's qualifiers and attributes, for code that spells them directly.
#define __global__
#define __device__
#define __host__
#define __shared__ static __attribute__((section("kiln_emu_shared")))
#define __constant__ static
#define __launch_bounds__(...)
#define __forceinline__ inline __attribute__((always_inline))
// __restrict__ is a GCC/Clang extension already.

namespace kiln::cuda {
inline namespace emu {

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: as CUDA's
};

// The vector types kernels load and store through (16- and 8-byte aligned, as on a GPU).
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) double2 {
  double x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }

constexpr int warpSize = 32;

// The built-in variables: set by the scheduler at every switch into a thread (one OS thread
// runs a whole grid, so thread-locals are exact and cheap).
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread uint3 blockDim;
extern __thread uint3 gridDim;

struct EmuStream;  // only ever null: the emulator runs launches synchronously

namespace detail {

enum class WarpOp : uint8_t { sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all };

void syncthreads(const char* file, int line);
// Arrives at a warp collective with this lane's value; returns what the collective gives it.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
unsigned char* dynamic_shared();

// Runs thunk(ctx) as every thread of every block; throws kiln::Error on what it detects.
void run_grid(const char* kernel, dim3 grid, dim3 block, size_t shmem, void (*thunk)(void*), void* ctx);

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T>
T from_bits(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

}  // namespace detail

#define __syncthreads() ::kiln::cuda::emu::detail::syncthreads(__FILE__, __LINE__)

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  detail::warp_collective(detail::WarpOp::sync, mask, 0, 0, warpSize);
}
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return detail::from_bits<T>(detail::warp_collective(detail::WarpOp::shfl_idx, mask, detail::to_bits(var), src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return detail::from_bits<T>(detail::warp_collective(detail::WarpOp::shfl_up, mask, detail::to_bits(var), int(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return detail::from_bits<T>(detail::warp_collective(detail::WarpOp::shfl_down, mask, detail::to_bits(var), int(delta), width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return detail::from_bits<T>(detail::warp_collective(detail::WarpOp::shfl_xor, mask, detail::to_bits(var), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return unsigned(detail::warp_collective(detail::WarpOp::ballot, mask, pred != 0, 0, warpSize));
}
inline int __any_sync(unsigned mask, int pred) {
  return int(detail::warp_collective(detail::WarpOp::any, mask, pred != 0, 0, warpSize));
}
inline int __all_sync(unsigned mask, int pred) {
  return int(detail::warp_collective(detail::WarpOp::all, mask, pred != 0, 0, warpSize));
}

// Atomics: threads never run at the same time, so a plain read-modify-write is atomic.
template <class T>
T emu_atomic_add(T* p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
inline int atomicAdd(int* p, int v) { return emu_atomic_add(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return emu_atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return emu_atomic_add(p, v); }
inline float atomicAdd(float* p, float v) { return emu_atomic_add(p, v); }
inline double atomicAdd(double* p, double v) { return emu_atomic_add(p, v); }
inline int atomicSub(int* p, int v) { return emu_atomic_add(p, -v); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return emu_atomic_add(p, 0u - v); }
template <class T>
T emu_atomic_max(T* p, T v) {
  T old = *p;
  *p = old > v ? old : v;
  return old;
}
template <class T>
T emu_atomic_min(T* p, T v) {
  T old = *p;
  *p = old < v ? old : v;
  return old;
}
inline int atomicMax(int* p, int v) { return emu_atomic_max(p, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return emu_atomic_max(p, v); }
inline int atomicMin(int* p, int v) { return emu_atomic_min(p, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return emu_atomic_min(p, v); }
template <class T>
T emu_atomic_cas(T* p, T compare, T v) {
  T old = *p;
  if (old == compare) *p = v;
  return old;
}
inline int atomicCAS(int* p, int c, int v) { return emu_atomic_cas(p, c, v); }
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) { return emu_atomic_cas(p, c, v); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  return emu_atomic_cas(p, c, v);
}
template <class T>
T emu_atomic_exch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
inline int atomicExch(int* p, int v) { return emu_atomic_exch(p, v); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return emu_atomic_exch(p, v); }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) { return emu_atomic_exch(p, v); }
inline float atomicExch(float* p, float v) { return emu_atomic_exch(p, v); }

template <class T>
T __ldg(const T* p) {
  return *p;
}

inline int __float_as_int(float f) { return detail::from_bits<int>(detail::to_bits(f)); }
inline unsigned __float_as_uint(float f) { return detail::from_bits<unsigned>(detail::to_bits(f)); }
inline float __int_as_float(int i) { return detail::from_bits<float>(detail::to_bits(i)); }
inline float __uint_as_float(unsigned u) { return detail::from_bits<float>(detail::to_bits(u)); }
inline long long __double_as_longlong(double d) { return detail::from_bits<long long>(detail::to_bits(d)); }
inline double __longlong_as_double(long long i) { return detail::from_bits<double>(detail::to_bits(i)); }

// Fast-math intrinsics: the emulator computes them exactly (a GPU's approximate versions are
// checked against tolerances by the gpu tests, not here).
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
using ::fmaf;

inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

}  // namespace emu
}  // namespace kiln::cuda
