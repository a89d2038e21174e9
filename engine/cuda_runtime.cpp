// The engine's CUDA runtime (engine/cuda_runtime.h). With CUDA it wraps the runtime API; without
// it, it also defines the functions of kernels/cuda/runtime.h as stubs (device_count() 0, the rest
// throwing), so callers need no #ifdefs.
// Tests: tests/engine/test_cuda_runtime.cpp, tests/gpu/test_gpu_runtime.cpp.
#include "engine/cuda_runtime.h"

#include <cstdlib>

#include "engine/error.h"

#if defined(KILN_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace kiln::cuda {

bool built_with_cuda() {
#if defined(KILN_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

bool is_available() { return device_count() > 0; }

void check_device(const Device& device) {
  KILN_CHECK(device.is_cuda(), "check_device: ", device, " is not a CUDA device");
  KILN_CHECK(built_with_cuda(), "device ", device, ": kiln was built without CUDA");
  const int n = device_count();
  KILN_CHECK(n > 0, "device ", device, ": no CUDA device is available (", no_device_reason(), ")");
  KILN_CHECK(device.index >= 0 && device.index < n, "device ", device, " does not exist (", n, " CUDA device",
             n == 1 ? "" : "s", " visible)");
}

int local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    KILN_CHECK(end && *end == '\0' && r >= 0, var, "='", v, "' is not a local rank");
    return int(r);
  }
  return -1;
}

int device_for_local_rank() {
  const int n = device_count();
  KILN_CHECK(built_with_cuda(), "device_for_local_rank: kiln was built without CUDA");
  KILN_CHECK(n > 0, "device_for_local_rank: no CUDA device is available (", no_device_reason(), ")");
  const int r = local_rank();
  return r < 0 ? 0 : r % n;
}

int select_device_by_local_rank() {
  const int d = device_for_local_rank();
  set_device(d);
  return d;
}

#if defined(KILN_HAVE_CUDA)

void synchronize() { device_synchronize(); }

CudaStream::CudaStream(int device) : device_(device < 0 ? current_device() : device) {
  DeviceGuard g(device_);
  cudaStream_t s = nullptr;
  KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CudaStream::~CudaStream() {
  // Waits for the stream's work first: the caching allocator keys its cached blocks by stream
  // handle, and a stream created later may get the same handle and reuse them at once (found by
  // the emulated device's stream sanitizer). Destructors do not throw.
  if (!stream_) return;
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
}

void CudaStream::synchronize() const { stream_synchronize(stream_); }

bool CudaStream::query() const {
  const cudaError_t e = cudaStreamQuery(stream_);
  if (e == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(e);
  return true;
}

CudaEvent::CudaEvent(bool timing) : device_(current_device()) {
  cudaEvent_t e = nullptr;
  KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
}

CudaEvent::~CudaEvent() {
  if (event_) (void)cudaEventDestroy(event_);
}

void CudaEvent::record() { record(current_stream()); }
void CudaEvent::record(Stream stream) {
  KILN_CUDA_CHECK(cudaEventRecord(event_, stream));
  recorded_ = true;
}
void CudaEvent::wait() { wait(current_stream()); }
void CudaEvent::wait(Stream stream) const {
  if (recorded_) KILN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool CudaEvent::query() const {
  if (!recorded_) return true;
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(e);
  return true;
}

void CudaEvent::synchronize() const {
  if (recorded_) KILN_CUDA_CHECK(cudaEventSynchronize(event_));
}

float CudaEvent::elapsed_ms(const CudaEvent& start) const {
  KILN_CHECK(recorded_ && start.recorded_, "CudaEvent::elapsed_ms: both events must be recorded");
  float ms = 0;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

StreamGuard::StreamGuard(int device, Stream stream) : prev_device_(current_device()), device_(device) {
  set_device(device_);
  prev_stream_ = current_stream(device_);
  set_current_stream(device_, stream);
}

StreamGuard::~StreamGuard() {
  set_current_stream(device_, prev_stream_);
  (void)cudaSetDevice(prev_device_);
}

DeviceGuard::DeviceGuard(int device) : prev_(current_device()), device_(device) {
  if (device_ != prev_) set_device(device_);
}

DeviceGuard::~DeviceGuard() {
  if (device_ != prev_) (void)cudaSetDevice(prev_);
}

#else  // no CUDA: stubs for the engine API and for kernels/cuda/runtime.h

namespace {
[[noreturn]] void no_cuda(const char* what) { KILN_THROW(what, ": kiln was built without CUDA"); }
}  // namespace

void synchronize() { no_cuda("cuda::synchronize"); }
CudaStream::CudaStream(int) { no_cuda("CudaStream"); }
CudaStream::~CudaStream() = default;
void CudaStream::synchronize() const { no_cuda("CudaStream::synchronize"); }
bool CudaStream::query() const { no_cuda("CudaStream::query"); }
CudaEvent::CudaEvent(bool) { no_cuda("CudaEvent"); }
CudaEvent::~CudaEvent() = default;
void CudaEvent::record() { no_cuda("CudaEvent::record"); }
void CudaEvent::record(Stream) { no_cuda("CudaEvent::record"); }
void CudaEvent::wait() { no_cuda("CudaEvent::wait"); }
void CudaEvent::wait(Stream) const { no_cuda("CudaEvent::wait"); }
bool CudaEvent::query() const { no_cuda("CudaEvent::query"); }
void CudaEvent::synchronize() const { no_cuda("CudaEvent::synchronize"); }
float CudaEvent::elapsed_ms(const CudaEvent&) const { no_cuda("CudaEvent::elapsed_ms"); }
StreamGuard::StreamGuard(int, Stream) : prev_device_(0), device_(0), prev_stream_(nullptr) { no_cuda("StreamGuard"); }
StreamGuard::~StreamGuard() = default;
DeviceGuard::DeviceGuard(int) : prev_(0), device_(0) { no_cuda("DeviceGuard"); }
DeviceGuard::~DeviceGuard() = default;

int device_count() { return 0; }
std::string no_device_reason() { return "kiln was built without CUDA"; }
DeviceProperties device_properties(int) { no_cuda("cuda::device_properties"); }
int current_device() { no_cuda("cuda::current_device"); }
void set_device(int) { no_cuda("cuda::set_device"); }
Stream current_stream() { return nullptr; }
Stream current_stream(int) { return nullptr; }
void set_current_stream(Stream) { no_cuda("cuda::set_current_stream"); }
void set_current_stream(int, Stream) { no_cuda("cuda::set_current_stream"); }
void device_synchronize() { no_cuda("cuda::device_synchronize"); }
void stream_synchronize(Stream) { no_cuda("cuda::stream_synchronize"); }
void memcpy_async(void*, const void*, size_t, Stream) { no_cuda("cuda::memcpy_async"); }
void memcpy_peer_async(void*, int, const void*, int, size_t, Stream) { no_cuda("cuda::memcpy_peer_async"); }
Versions versions() { return Versions{}; }
std::string cuda_version_string(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

#endif

}  // namespace kiln::cuda
