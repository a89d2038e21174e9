// Host <-> device byte copies (engine/cuda_copy.h). Tests: tests/gpu/test_gpu_tensor.cpp.
#include "engine/cuda_copy.h"

#include <cstring>

#include "engine/cuda_allocator.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/tensor.h"

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
    if (pinned.is_pinned(src)) {
      DeviceGuard g(dst_device.index);
      const Stream s = current_stream(dst_device.index);
      memcpy_async(dst, src, bytes, s);
      pinned.record_event(const_cast<void*>(src), dst_device.index, s);
      return;
    }
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

Tensor pin_memory(const Tensor& t) {
  KILN_CHECK(t.device().is_cpu(), "pin_memory: ", t.str(), " is not on the CPU");
  KILN_CHECK(built_with_cuda(), "pin_memory: kiln was built without CUDA");
  Tensor c = t.contiguous();
  const size_t n = size_t(c.numel()) * c.element_size();
  PinnedAllocator& pinned = PinnedAllocator::instance();
  void* p = pinned.allocate(n);
  if (n) std::memcpy(p, c.data_ptr(), n);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(p, n, Device(), [](void* q, size_t) { PinnedAllocator::instance().free(q); });
  impl->sizes = c.sizes();
  impl->strides = contiguous_strides(c.sizes());
  impl->dtype = c.dtype();
  return Tensor(impl);
}

bool is_pinned(const Tensor& t) {
  if (!t.device().is_cpu() || !built_with_cuda() || !t.impl()->storage->data) return false;
  return PinnedAllocator::instance().is_pinned(t.impl()->storage->data);
}

void record_stream(const Tensor& t, Stream stream) {
  KILN_CHECK(t.device().is_cuda(), "record_stream: ", t.str(), " is not a CUDA tensor");
  CudaCachingAllocator::instance().record_stream(t.impl()->storage->data, stream);
}

}  // namespace kiln::cuda
