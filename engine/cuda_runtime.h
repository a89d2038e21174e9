// The CUDA device runtime for everything above kernels/: availability, devices, RAII streams and
// events, a scoped current stream, device choice by local rank. Compiled in every build; without
// CUDA, is_available() is false, device_count() is 0 and everything else throws kiln::Error
// ("kiln was built without CUDA"). The functions of kernels/cuda/runtime.h (current_stream,
// set_device, memcpy_async, versions ...) are re-exported here.
//
// Thread-safety: the current device and stream are per thread (as in the CUDA runtime and
// PyTorch); CudaStream and CudaEvent objects are not shared-mutation safe.
// Tests: tests/engine/test_cuda_runtime.cpp (no device), tests/gpu/ (ctest -L gpu).
#pragma once

#include <string>

#include "engine/device.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cuda {

// True when kiln was built with CUDA and at least one device is usable.
bool is_available();
// True when kiln was built with CUDA (whether or not this machine has a GPU).
bool built_with_cuda();
// Throws the "built without CUDA" / "no CUDA device" / "no device N" error unless `device` is a
// usable CUDA device.
void check_device(const Device& device);

// Waits for all work on the current device (cudaDeviceSynchronize).
void synchronize();

// An owned stream on a device (non-blocking with respect to the legacy default stream, like
// PyTorch's streams: order against it with events).
class CudaStream {
 public:
  explicit CudaStream(int device = -1);  // -1: the current device
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStream(CudaStream&& o) noexcept : device_(o.device_), stream_(o.stream_) { o.stream_ = nullptr; }

  Stream stream() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;
  bool query() const;  // true when all work queued so far has finished

 private:
  int device_ = 0;
  Stream stream_ = nullptr;
};

// A CUDA event (timing enabled unless asked otherwise).
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = true);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Records on `stream` (default: the current stream of the current device).
  void record();
  void record(Stream stream);
  // Makes `stream` (default: current) wait for this event on the device, without blocking the host.
  void wait();
  void wait(Stream stream) const;
  bool query() const;  // true when recorded work has finished (or never recorded)
  void synchronize() const;
  // Milliseconds between `start`'s record and this event's (both finished).
  float elapsed_ms(const CudaEvent& start) const;
  Event event() const { return event_; }

 private:
  // The device and record state are read only where CUDA is built (engine/cuda_runtime.cpp).
  Event event_ = nullptr;
  [[maybe_unused]] int device_ = 0;
  [[maybe_unused]] bool recorded_ = false;
};

// Sets the current stream (and device) of this thread for its scope, restoring both after.
class StreamGuard {
 public:
  explicit StreamGuard(const CudaStream& stream) : StreamGuard(stream.device(), stream.stream()) {}
  StreamGuard(int device, Stream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  [[maybe_unused]] int prev_device_, device_;  // used only where CUDA is built
  [[maybe_unused]] Stream prev_stream_;
};

// Sets the current device for its scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  [[maybe_unused]] int prev_, device_;  // used only where CUDA is built
};

// The node-local rank from the launcher's environment (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID,
// MPI_LOCALRANKID, PMI_LOCAL_RANK, first found), or -1 when none is set.
int local_rank();
// The device this process should use: local_rank() modulo the device count (0 without a launcher).
// Throws when no CUDA device is usable.
int device_for_local_rank();
// Makes device_for_local_rank() the current device and returns it.
int select_device_by_local_rank();

}  // namespace kiln::cuda
