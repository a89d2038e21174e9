// The CUDA runtime wrappers declared in kernels/cuda/runtime.h (compiled only when KILN_HAVE_CUDA).
// Tested on a device by tests/gpu (ctest -L gpu).
#include "kernels/cuda/runtime.h"

#include <utility>
#include <vector>

#if defined(KILN_HAVE_CUBLAS)
// cublas_v2.h, not cublas_api.h: before CUDA 12 the latter #errors unless CUBLASAPI is defined.
#include <cublas_v2.h>
#endif
#if defined(KILN_HAVE_CUDNN)
#include <cudnn.h>
#endif
#if defined(KILN_HAVE_NCCL)
#include <nccl.h>
#endif

namespace kiln::cuda {

namespace detail {
void throw_cuda_error(int code, const char* name, const char* message, const char* call, const char* file,
                      int line) {
  throw Error(::kiln::detail::concat(call, ": ", name, " (", code, "): ", message), file, line);
}
}  // namespace detail

namespace {
// Statuses meaning "this machine has no usable GPU" rather than a failure of kiln.
bool means_no_device(cudaError_t e) {
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
#if CUDART_VERSION >= 11010
    case cudaErrorStubLibrary:
#endif
#if CUDART_VERSION >= 10010
    case cudaErrorSystemDriverMismatch:
#endif
      return true;
    default:
      return false;
  }
}

int check_device(int device) {
  const int n = device_count();
  KILN_CHECK(n > 0, "CUDA device ", device, " requested but no CUDA device is available");
  KILN_CHECK(device >= 0 && device < n, "CUDA device ", device, " does not exist (", n, " device",
             n == 1 ? "" : "s", " visible)");
  return device;
}

// The current stream of each device, for this thread (nullptr: the default stream).
thread_local std::vector<Stream> t_streams;
}  // namespace

// Enumerated once: the set of visible devices does not change within a process. Any failure to
// enumerate means "no usable device" (never an exception, so `kiln info` and is_available() work
// on every machine); failures other than the expected ones are kept for no_device_reason().
static const std::pair<int, std::string>& enumeration() {
  static const std::pair<int, std::string> result = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) return std::pair<int, std::string>(n, n > 0 ? "" : "no CUDA device");
    (void)cudaGetLastError();  // clear it so later calls start clean
    std::string why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    if (!means_no_device(e)) why = "cudaGetDeviceCount failed, " + why;
    return std::pair<int, std::string>(0, why);
  }();
  return result;
}

int device_count() { return enumeration().first; }
std::string no_device_reason() { return enumeration().second; }

DeviceProperties device_properties(int device) {
  check_device(device);
  cudaDeviceProp p{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties d;
  d.index = device;
  d.name = p.name;
  d.total_memory = p.totalGlobalMem;
  d.major = p.major;
  d.minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  return d;
}

int current_device() {
  int d = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int device) { KILN_CUDA_CHECK(cudaSetDevice(check_device(device))); }

Stream current_stream(int device) {
  if (device < 0 || size_t(device) >= t_streams.size()) return nullptr;
  return t_streams[size_t(device)];
}
Stream current_stream() { return current_stream(current_device()); }

void set_current_stream(int device, Stream stream) {
  check_device(device);
  if (t_streams.size() <= size_t(device)) t_streams.resize(size_t(device) + 1, nullptr);
  t_streams[size_t(device)] = stream;
}
void set_current_stream(Stream stream) { set_current_stream(current_device(), stream); }

void device_synchronize() { KILN_CUDA_CHECK(cudaDeviceSynchronize()); }
void stream_synchronize(Stream stream) { KILN_CUDA_CHECK(cudaStreamSynchronize(stream)); }

void memcpy_async(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
}

void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  KILN_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream));
}

Versions versions() {
  Versions v;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = CUDART_VERSION;
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  (void)cudaGetLastError();
#if defined(KILN_HAVE_CUDNN)
  v.cudnn = int(cudnnGetVersion());
#endif
#if defined(KILN_HAVE_CUBLAS)
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = major * 10000 + minor * 100 + patch;
#endif
#if defined(KILN_HAVE_NCCL)
  if (ncclGetVersion(&v.nccl) != ncclSuccess) v.nccl = 0;
#endif
  return v;
}

std::string cuda_version_string(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace kiln::cuda
