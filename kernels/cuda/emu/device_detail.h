// What the emulated device's sources share (kernels/cuda/emu/device.cpp, which keeps the state,
// the memory protection and the stream sanitizer; kernels/cuda/emu/runtime_api.cpp, the runtime
// API served from them): the process-wide state, a stream, the current device and last error per
// thread, and the checked copies, fills, allocations and synchronisations the runtime calls.
// Internal to kernels/cuda/emu/: it includes the emulated cuda_runtime_api.h.
// Tests: tests/emu_device/ (ctest --test-dir build-emu-device -L emu_device), tests/gpu.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/emu/device.h"

struct CUstream_st {
  int device = 0;
  bool blocking = true;  // synchronises with the legacy default stream (cudaStreamDefault)
  bool legacy = false;   // the device's legacy default stream (cudaStream_t 0)
  uint32_t id = 0;       // its index in every vector clock
  std::vector<uint64_t> clock;
};

namespace kiln::cuda::emu_device::device_detail {

using Clock = std::vector<uint64_t>;

// a = max(a, b), element by element.
void join(Clock& a, const Clock& b);

// One access of device memory: the seq-th operation of stream `stream` (0: none).
struct Access {
  uint32_t stream = 0;
  uint64_t seq = 0;
  int device = -1;
  const char* what = nullptr;  // the kernel's name (a literal, from KILN_LAUNCH), or the runtime call
  bool kernel = false;
};

// A tracked piece of device memory: a cudaMalloc region, or a block of the caching allocator.
struct Region {
  char* begin = nullptr;
  size_t size = 0;
  int device = 0;
  bool block = false;
  bool freed = false;  // blocks only: returned to the allocator, history kept for its reuse
  Access last_write;
  std::vector<Access> reads;  // since the last write, the last per stream
};

struct DeviceMem {
  char* base = nullptr;
  size_t capacity = 0;  // bytes the device reports and serves
  std::map<size_t, size_t> free_ranges;  // offset -> length
  std::unique_ptr<CUstream_st> legacy;
  std::vector<CUstream_st*> streams;  // every live stream of the device, the legacy one included
};

struct State {
  std::recursive_mutex mu;
  std::vector<DeviceMem> devices;
  Arch arch;
  std::string arch_name = "sm_90";
  uint32_t next_stream = 1;
  Clock host;  // what the host has waited for
  std::map<char*, Region> raw;     // cudaMalloc / cudaMallocAsync regions
  std::map<char*, Region> blocks;  // caching-allocator blocks, live or freed
  std::map<void*, size_t> pinned;
  int open_depth = 0;
  SanitizerStats stats;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  State();  // reads KILN_EMU_ARCH, KILN_EMU_DEVICES, KILN_EMU_DEVICE_MEMORY; maps the devices
};

// The one state, made on first use and never destroyed (streams and events may outlive static
// destructors).
State& state();

extern thread_local int t_device;        // the current device (cudaSetDevice)
extern thread_local cudaError_t t_last;  // the last error (cudaGetLastError)

size_t round_up(size_t n, size_t a);

// Records `e` as the thread's last error and returns it.
cudaError_t fail(cudaError_t e);
bool valid_device(const State& s, int d);
// The device whose memory holds p, or -1 (host memory).
int device_of(const State& s, const void* p);
// Milliseconds since the state was made: the time an event records.
double now_ms(const State& s);

// With State::mu held. The stream itself, or for nullptr the legacy default stream of `device`.
CUstream_st* resolve(State& s, cudaStream_t stream, int device);
// Brings st's clock up to what the host has waited for and, for the legacy default stream and
// blocking streams, to each other's: what every operation on `st` starts from.
void order(State& s, CUstream_st* st);
// The host has waited for everything `c` covers.
void host_waits(State& s, const Clock& c);
void device_sync(State& s, int device);
void all_sync(State& s);

// cudaMemcpy*Async and cudaMemset*: each end checked against its allocation and recorded as an
// access on the stream, then the bytes move. They lock State::mu themselves.
cudaError_t copy(void* dst, const void* src, size_t bytes, cudaStream_t stream, int device, const char* call);
cudaError_t fill(void* p, int value, size_t bytes, cudaStream_t stream, const char* call);
// cudaMalloc (stream nullptr) and cudaMallocAsync on the current device; cudaFree
// (synchronise) and cudaFreeAsync. They lock State::mu themselves.
cudaError_t malloc_on(void** ptr, size_t bytes, cudaStream_t stream, const char* call);
cudaError_t free_raw(void* ptr, bool synchronise);

}  // namespace kiln::cuda::emu_device::device_detail
