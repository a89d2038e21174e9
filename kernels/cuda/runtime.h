// The CUDA runtime as kiln uses it: devices, their properties, the current device, the current
// stream per thread and device, memory copies and versions; KILN_CUDA_CHECK turns a cudaError_t
// into a kiln::Error. Host C++ (no kernels here); defined in kernels/cuda/runtime.cpp, which is
// compiled only when KILN_HAVE_CUDA. This header is includable in every build: the stream and
// event handles are the CUDA types themselves (cudaStream_t is `CUstream_st*`), forward-declared,
// so engine/ can hold them without the CUDA headers. Without CUDA, engine/cuda_runtime.cpp
// defines these functions: device_count() returns 0 and the rest throw "built without CUDA".
// Tested on a device by tests/gpu (ctest -L gpu); without one those tests report Skipped.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/common/error.h"

struct CUstream_st;
struct CUevent_st;

namespace kiln::cuda {

using Stream = CUstream_st*;  // == cudaStream_t; nullptr is the legacy default stream
using Event = CUevent_st*;    // == cudaEvent_t

struct DeviceProperties {
  int index = 0;
  std::string name;
  size_t total_memory = 0;  // bytes
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
};

// Number of CUDA devices visible; 0 when there is no driver, no device or an insufficient
// driver (those are not errors: the machine simply has no usable GPU).
int device_count();
// Why device_count() is 0 ("cudaErrorNoDevice: no CUDA-capable device is detected"); "" if not.
std::string no_device_reason();
DeviceProperties device_properties(int device);
int current_device();
void set_device(int device);

// The stream kernels of this thread launch on for the current device (nullptr, the default
// stream, until set). Per thread and per device, like PyTorch's current stream.
Stream current_stream();
Stream current_stream(int device);
void set_current_stream(Stream stream);  // for the current device
void set_current_stream(int device, Stream stream);

// Blocks until every stream of the current device is idle (cudaDeviceSynchronize).
void device_synchronize();
void stream_synchronize(Stream stream);
// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing tells host from device).
void memcpy_async(void* dst, const void* src, size_t bytes, Stream stream);
// Copies between devices (cudaMemcpyPeerAsync), ordered on `stream` of the current device.
void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t bytes, Stream stream);

// Versions as the libraries encode them (CUDA 13000 = 13.0; cuDNN 90100 = 9.1.0); 0 when not
// built with the library or not found (driver 0: no driver).
struct Versions {
  int runtime = 0;
  int driver = 0;
  int cudnn = 0;
  int cublas = 0;  // major*10000 + minor*100 + patch
  int nccl = 0;    // NCCL_VERSION_CODE style: 22809 = 2.28.9
};
Versions versions();
// "13.0" from 13000.
std::string cuda_version_string(int v);

// What the caching allocator hands out and takes back, for the emulated device's stream sanitizer
// (kernels/cuda/emu/device.h), as PyTorch's allocator reports to its GPU trace: a block is
// tracked from block_allocated (on `stream`) to block_freed, and its reuse is checked against its
// earlier uses. Empty inline functions except in the emu-device build (KILN_EMU_DEVICE).
namespace trace {
#if defined(KILN_EMU_DEVICE)
void block_allocated(const void* p, size_t bytes, int device, Stream stream);
void block_freed(const void* p, size_t bytes);
#else
inline void block_allocated(const void*, size_t, int, Stream) {}
inline void block_freed(const void*, size_t) {}
#endif
}  // namespace trace

namespace detail {
[[noreturn]] void throw_cuda_error(int code, const char* name, const char* message, const char* call,
                                   const char* file, int line);
}  // namespace detail

}  // namespace kiln::cuda

#if defined(KILN_HAVE_CUDA)
#include <cuda_runtime_api.h>

// Throws kiln::Error naming the call, the CUDA error's name and text, and file:line.
#define KILN_CUDA_CHECK(call)                                                                      \
  do {                                                                                             \
    const cudaError_t kiln_cuda_err_ = (call);                                                     \
    if (kiln_cuda_err_ != cudaSuccess) [[unlikely]]                                                \
      ::kiln::cuda::detail::throw_cuda_error(int(kiln_cuda_err_), cudaGetErrorName(kiln_cuda_err_), \
                                             cudaGetErrorString(kiln_cuda_err_), #call, __FILE__,  \
                                             __LINE__);                                            \
  } while (0)
#endif
