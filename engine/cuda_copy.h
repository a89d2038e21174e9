// Byte copies between the host and CUDA devices, as Tensor::to(Device) and copy_ use them.
//  - host -> device: through a pinned staging buffer (PinnedAllocator), cudaMemcpyAsync on the
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

#include "engine/device.h"

namespace kiln::cuda {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace kiln::cuda
