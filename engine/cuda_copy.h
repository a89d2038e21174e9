// Byte copies between the host and CUDA devices, as Tensor::to(Device) and copy_ use them.
//  - host -> device: straight from the source when it is pinned (pin_memory), else through a
//    pinned staging buffer (PinnedAllocator), cudaMemcpyAsync on the
//    destination's current stream; the buffer is reused only after that copy's event, so the call
//    returns without waiting for the device.
//  - device -> host: cudaMemcpyAsync on the source's current stream, then that stream is
//    synchronised (the host reads the result next).
//  - device -> same device: cudaMemcpyAsync on the current stream (asynchronous).
//  - device -> other device: the source's current stream is synchronised, cudaMemcpyPeerAsync
//    runs on the destination's current stream, which is then synchronised too (so the source
//    may be freed and reused on its own stream at once).
// Without CUDA every CUDA case throws "kiln was built without CUDA".
// Tests: tests/gpu/test_gpu_tensor.cpp.
#pragma once

#include <cstddef>

#include "engine/cuda_runtime.h"
#include "engine/device.h"

namespace kiln {
class Tensor;
}

namespace kiln::cuda {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// A contiguous copy of the CPU tensor `t` in page-locked memory (PinnedAllocator): `to(cuda)` from
// it is a truly asynchronous copy, so a data loader can copy the next batch while the device
// computes. Do not write into it while a copy from it may still run. Throws without CUDA.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);

// Marks the CUDA tensor `t`'s memory as used by work on `stream` (PyTorch's record_stream): when
// it is freed, the caching allocator reuses it only after that work is done. Needed when a
// tensor allocated on one stream is used on another.
void record_stream(const Tensor& t, Stream stream);

}  // namespace kiln::cuda
