// Host <-> device byte copies (engine/cuda_copy.h). Tests: tests/gpu/test_gpu_tensor.cpp.
#include "engine/cuda_copy.h"

#include <cstring>

#include "engine/cuda_allocator.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"

namespace kiln::cuda {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (dst_device.is_cuda()) check_device(dst_device);
  if (src_device.is_cuda()) check_device(src_device);

  if (src_device.is_cpu()) {
    PinnedAllocator& pinned = PinnedAllocator::instance();
    void* staging = pinned.allocate(bytes);
    std::memcpy(staging, src, bytes);
    try {
      DeviceGuard g(dst_device.index);
      const Stream s = current_stream(dst_device.index);
      memcpy_async(dst, staging, bytes, s);
      pinned.record_event(staging, dst_device.index, s);
    } catch (...) {
      pinned.free(staging);
      throw;
    }
    pinned.free(staging);
    return;
  }
  if (dst_device.is_cpu()) {
    DeviceGuard g(src_device.index);
    const Stream s = current_stream(src_device.index);
    memcpy_async(dst, src, bytes, s);
    stream_synchronize(s);
    return;
  }
  if (dst_device.index == src_device.index) {
    DeviceGuard g(dst_device.index);
    memcpy_async(dst, src, bytes, current_stream(dst_device.index));
    return;
  }
  stream_synchronize(current_stream(src_device.index));
  DeviceGuard g(dst_device.index);
  const Stream s = current_stream(dst_device.index);
  memcpy_peer_async(dst, dst_device.index, src, src_device.index, bytes, s);
  stream_synchronize(s);
}

}  // namespace kiln::cuda
