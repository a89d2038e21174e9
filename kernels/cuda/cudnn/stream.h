// The one declaration the cudnn backend needs from kiln's CUDA runtime: the stream kernels of this
// thread launch on for the current device. It is the same declaration as kernels/cuda/runtime.h
// (branch `cudart`), repeated here so this backend builds before that header lands; the
// definition is runtime.cpp's, with a weak fallback in stream_fallback.cpp (the default stream)
// for builds that do not have it. Once runtime.h is merged this header can include it instead.
#pragma once

struct CUstream_st;

namespace kiln::cuda {
using Stream = CUstream_st*;  // == cudaStream_t; nullptr is the legacy default stream
Stream current_stream();
}  // namespace kiln::cuda
