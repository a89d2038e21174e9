// The CUDA runtime API of kernels/cuda/emu/include/cuda_runtime_api.h, served on the host by the
// emulated device (kernels/cuda/emu/device.h): devices and their properties, errors, memory,
// copies and memsets, streams and events. The state, the checks and the stream sanitizer behind it
// are kernels/cuda/emu/device.cpp's (kernels/cuda/emu/device_detail.h).
// Tests: tests/emu_device/ (ctest --test-dir build-emu-device -L emu_device), tests/gpu.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "kernels/cuda/emu/device.h"
#include "kernels/cuda/emu/device_detail.h"

struct CUevent_st {
  int device = 0;
  bool timing = true;
  bool recorded = false;
  std::vector<uint64_t> clock;
  double ms = 0;  // host time when recorded (work runs when issued, so that is when it completed)
};

using kiln::cuda::emu_device::device_detail::State;
using namespace kiln::cuda::emu_device;                 // NOLINT: the C API below is this namespace's
using namespace kiln::cuda::emu_device::device_detail;  // NOLINT: and serves its state

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = int(state().devices.size());
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  State& s = state();
  if (!prop) return fail(cudaErrorInvalidValue);
  if (!valid_device(s, device)) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "kiln emulated device (%s)", s.arch_name.c_str());
  prop->totalGlobalMem = s.devices[size_t(device)].capacity;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = s.arch.max_shared_optin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = s.arch.major;
  prop->minor = s.arch.minor;
  prop->multiProcessorCount = 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (!value) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(state(), device)) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, t_device)) return fail(cudaErrorNoDevice);
  device_sync(s, t_device);
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorStubLibrary: return "cudaErrorStubLibrary";
    case cudaErrorSystemDriverMismatch: return "cudaErrorSystemDriverMismatch";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (KILN_EMU_DEVICES=0)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return malloc_on(ptr, bytes, nullptr, "cudaMalloc"); }
cudaError_t cudaFree(void* ptr) { return free_raw(ptr, true); }
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  // Stream-ordered: the pool makes a reuse wait for the free's stream, so the new region starts
  // with an allocation on `stream` and no history.
  return malloc_on(ptr, bytes, stream ? stream : resolve(state(), nullptr, t_device), "cudaMallocAsync");
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return free_raw(ptr, false); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return fail(cudaErrorInvalidValue);
  void* p = std::aligned_alloc(4096, round_up(std::max<size_t>(bytes, 1), 4096));
  if (!p) return fail(cudaErrorMemoryAllocation);
  s.pinned[p] = std::max<size_t>(bytes, 1);
  *ptr = p;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void* ptr) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!ptr) return cudaSuccess;
  auto it = s.pinned.find(ptr);
  if (it == s.pinned.end()) return fail(cudaErrorInvalidValue);
  all_sync(s);
  s.pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

namespace {
// cudaMemcpyKind against where the pointers are (cudaMemcpyDefault: wherever they are).
bool kind_matches(const State& s, const void* dst, const void* src, cudaMemcpyKind kind) {
  const bool d = device_of(s, dst) >= 0, h = device_of(s, src) >= 0;
  switch (kind) {
    case cudaMemcpyHostToHost: return !d && !h;
    case cudaMemcpyHostToDevice: return d && !h;
    case cudaMemcpyDeviceToHost: return !d && h;
    case cudaMemcpyDeviceToDevice: return d && h;
    case cudaMemcpyDefault: return true;
  }
  return false;
}
}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!kind_matches(s, dst, src, kind)) return fail(cudaErrorInvalidMemcpyDirection);
  const int device = stream ? stream->device : t_device;
  return copy(dst, src, bytes, stream, device, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!kind_matches(s, dst, src, kind)) return fail(cudaErrorInvalidMemcpyDirection);
  const cudaError_t e = copy(dst, src, bytes, nullptr, t_device, "cudaMemcpy");
  if (e == cudaSuccess && valid_device(s, t_device)) host_waits(s, resolve(s, nullptr, t_device)->clock);
  return e;
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, dst_device) || !valid_device(s, src_device)) return fail(cudaErrorInvalidDevice);
  if (bytes && (device_of(s, dst) != dst_device || device_of(s, src) != src_device)) return fail(cudaErrorInvalidValue);
  return copy(dst, src, bytes, stream, stream ? stream->device : t_device, "cudaMemcpyPeerAsync");
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return fill(ptr, value, bytes, stream, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const cudaError_t e = fill(ptr, value, bytes, nullptr, "cudaMemset");
  if (e == cudaSuccess) host_waits(s, resolve(s, nullptr, t_device)->clock);
  return e;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!stream || (flags & ~unsigned(cudaStreamNonBlocking))) return fail(cudaErrorInvalidValue);
  if (!valid_device(s, t_device)) return fail(cudaErrorNoDevice);
  auto* st = new CUstream_st();
  st->device = t_device;
  st->blocking = !(flags & cudaStreamNonBlocking);
  st->id = s.next_stream++;
  order(s, st);
  s.devices[size_t(t_device)].streams.push_back(st);
  *stream = st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!stream || stream->legacy) return fail(cudaErrorInvalidResourceHandle);
  auto& v = s.devices[size_t(stream->device)].streams;
  auto it = std::find(v.begin(), v.end(), stream);
  if (it == v.end()) return fail(cudaErrorInvalidResourceHandle);
  v.erase(it);
  delete stream;  // its stamps stay meaningful: ids are never reused
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  order(s, st);
  host_waits(s, st->clock);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  if (event->recorded) join(st->clock, event->clock);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();
  e->device = t_device;
  e->timing = !(flags & cudaEventDisableTiming);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (!valid_device(s, stream ? stream->device : t_device)) return fail(cudaErrorNoDevice);
  CUstream_st* st = resolve(s, stream, t_device);
  if (st->device != event->device) return fail(cudaErrorInvalidResourceHandle);  // as on a GPU
  order(s, st);
  event->clock = st->clock;
  event->recorded = true;
  event->ms = now_ms(s);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (event->recorded) host_waits(s, event->clock);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return cudaEventSynchronize(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail(cudaErrorInvalidValue);
  if (!start->timing || !end->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = float(end->ms - start->ms);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0) return fail(cudaErrorInvalidValue);
  // As the device: more than the architecture's opt-in limit is refused.
  if (size_t(value) > arch().max_shared_optin) return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}

}  // extern "C"
