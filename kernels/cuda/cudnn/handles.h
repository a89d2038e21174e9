// cuDNN and cuBLAS handles, workspace and options of the cudnn backend (host C++; built only with
// KILN_HAVE_CUDNN). One Context per (thread, device, stream): handles are created lazily on first
// use and bound to kiln::cuda::current_stream(); handles are not thread-safe, so each thread gets
// its own, and they are deliberately never destroyed (destroying them at exit can run after the
// CUDA driver has shut down, as PyTorch found). The workspace is one grow-only device buffer per
// context, at most KILN_CUDNN_WORKSPACE_MB (default 1024) MiB; a grown buffer frees the old one
// only after synchronising its stream, so no queued kernel still reads it.
// Options (process-wide): TF32 for float32 GEMMs and convolutions (KILN_ALLOW_TF32=1 or
// set_allow_tf32; off by default so float32 results stay float32), cuDNN algorithm choice by
// timing once per shape (KILN_CUDNN_BENCHMARK=1 or set_benchmark; heuristics by default).
// Every status is checked: KILN_CUDNN_CHECK / KILN_CUBLAS_CHECK / KILN_CUDNN_CUDA_CHECK throw
// kiln::Error naming the call, the library's message, the op and shapes, and file:line.
//   Tests on a GPU: ctest -L gpu (tests/gpu/test_cudnn.cpp); mapping: ctest -R cudnn_mapping
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "kernels/common/dtype.h"
#include "kernels/common/error.h"

namespace kiln::cudnn {

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The context of the calling thread for the current device and kiln::cuda::current_stream().
Context& context();
// A device buffer of at least `bytes` from the context's workspace (valid until the next call on
// the same context). Throws when `bytes` exceeds workspace_limit() unless `over_limit` (for
// scratch a call cannot do without, such as an unwanted output cuDNN insists on writing).
void* workspace(Context& ctx, size_t bytes, bool over_limit = false);
size_t workspace_limit();  // bytes, from KILN_CUDNN_WORKSPACE_MB

bool allow_tf32();
void set_allow_tf32(bool on);
bool benchmark();
void set_benchmark(bool on);

// Compute capability major*10 + minor of `device` (cached).
int compute_capability(int device);
// Whether the current device runs cuDNN/cuBLAS math in `t`: float32 everywhere, float16 from
// sm_60 (Pascal), bfloat16 from sm_80 (Ampere) with cuDNN >= 8.1. False when no device answers.
bool device_supports(DType t);
cudnnDataType_t data_type(DType t);
cudaDataType_t blas_data_type(DType t);
const char* cublas_status_name(cublasStatus_t s);
// cuDNN's "not supported" statuses (9.x sub-codes included): a candidate algorithm or fused path
// that declines, to try the next one.
bool is_not_supported(cudnnStatus_t s);

// RAII wrappers of the descriptors (created once per plan or call).
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc();
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // dims N, C, H, W; memory NHWC when nhwc, else NCHW.
  void set(DType t, const int dims[4], bool nhwc);
  void set(DType t, int n, int c, int h, int w, bool nhwc = false);
};

namespace detail {
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const std::string& what, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const std::string& what, const char* file,
                               int line);
[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const std::string& what, const char* file, int line);
}  // namespace detail

}  // namespace kiln::cudnn

// KILN_CUDNN_CHECK(call, context...): context is streamed into the message (op name, desc.str()).
#define KILN_CUDNN_CHECK(call, ...)                                                                      \
  do {                                                                                                   \
    const cudnnStatus_t kiln_cudnn_s_ = (call);                                                          \
    if (kiln_cudnn_s_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                              \
      ::kiln::cudnn::detail::throw_cudnn(kiln_cudnn_s_, #call, ::kiln::detail::concat(__VA_ARGS__), __FILE__, \
                                         __LINE__);                                                      \
  } while (0)

#define KILN_CUBLAS_CHECK(call, ...)                                                                      \
  do {                                                                                                    \
    const cublasStatus_t kiln_cublas_s_ = (call);                                                         \
    if (kiln_cublas_s_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                             \
      ::kiln::cudnn::detail::throw_cublas(kiln_cublas_s_, #call, ::kiln::detail::concat(__VA_ARGS__), __FILE__, \
                                          __LINE__);                                                      \
  } while (0)

// The runtime calls this backend makes itself (workspace, copies); kernels/cuda/runtime.h's
// KILN_CUDA_CHECK is the same idea without the op context.
#define KILN_CUDNN_CUDA_CHECK(call, ...)                                                                  \
  do {                                                                                                    \
    const cudaError_t kiln_cuda_e_ = (call);                                                              \
    if (kiln_cuda_e_ != cudaSuccess) [[unlikely]]                                                         \
      ::kiln::cudnn::detail::throw_cuda(kiln_cuda_e_, #call, ::kiln::detail::concat(__VA_ARGS__), __FILE__, \
                                        __LINE__);                                                        \
  } while (0)
