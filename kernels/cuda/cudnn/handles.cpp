// Handles, workspace, options and error reporting of the cudnn backend (see handles.h).
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/handles.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/common/env.h"
#include "kernels/cuda/runtime.h"

namespace kiln::cudnn {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::atomic<int>& tf32_flag() {
  static std::atomic<int> f{env_flag("KILN_ALLOW_TF32") ? 1 : 0};
  return f;
}
std::atomic<int>& benchmark_flag() {
  static std::atomic<int> f{env_flag("KILN_CUDNN_BENCHMARK") ? 1 : 0};
  return f;
}

using Key = std::pair<int, cudaStream_t>;

}  // namespace

bool allow_tf32() { return tf32_flag().load(std::memory_order_relaxed) != 0; }
void set_allow_tf32(bool on) { tf32_flag().store(on ? 1 : 0); }
bool benchmark() { return benchmark_flag().load(std::memory_order_relaxed) != 0; }
void set_benchmark(bool on) { benchmark_flag().store(on ? 1 : 0); }

size_t workspace_limit() {
  static const size_t limit = size_t(env_int("KILN_CUDNN_WORKSPACE_MB", 0, int64_t(1) << 24, 1024)) << 20;
  return limit;
}

Context& context() {
  // Leaked on purpose (see handles.h): one map per thread, its contexts live to the process end.
  static thread_local std::map<Key, Context*>* contexts = new std::map<Key, Context*>();
  int device = 0;
  KILN_CUDNN_CUDA_CHECK(cudaGetDevice(&device), "cudnn backend: current device");
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(kiln::cuda::current_stream());
  Context*& ctx = (*contexts)[Key(device, stream)];
  if (!ctx) {
    auto* c = new Context();
    c->device = device;
    c->stream = stream;
    KILN_CUDNN_CHECK(cudnnCreate(&c->dnn), "cudnn backend: handle for device ", device);
    KILN_CUDNN_CHECK(cudnnSetStream(c->dnn, stream), "cudnn backend: device ", device);
    KILN_CUBLAS_CHECK(cublasCreate(&c->blas), "cudnn backend: cuBLAS handle for device ", device);
    KILN_CUBLAS_CHECK(cublasSetStream(c->blas, stream), "cudnn backend: device ", device);
    // Device-side alpha/beta are never used: kiln passes host scalars.
    KILN_CUBLAS_CHECK(cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST), "cudnn backend");
    ctx = c;
  }
  return *ctx;
}

void* workspace(Context& ctx, size_t bytes, bool over_limit) {
  if (bytes == 0) return ctx.workspace;
  if (bytes <= ctx.workspace_bytes) return ctx.workspace;
  KILN_CHECK(over_limit || bytes <= workspace_limit(), "cudnn backend: workspace of ", bytes,
             " bytes exceeds KILN_CUDNN_WORKSPACE_MB (", workspace_limit() >> 20, " MiB)");
  const size_t rounded = (bytes + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
  if (ctx.workspace) {
    // Queued kernels may still read the old buffer: wait for them before freeing it.
    KILN_CUDNN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream), "cudnn backend: growing the workspace");
    KILN_CUDNN_CUDA_CHECK(cudaFree(ctx.workspace), "cudnn backend: growing the workspace");
    ctx.workspace = nullptr;
    ctx.workspace_bytes = 0;
  }
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, rounded);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    detail::throw_cuda(e, "cudaMalloc", ::kiln::detail::concat("cudnn backend: workspace of ", rounded, " bytes"), __FILE__,
                       __LINE__);
  }
  ctx.workspace = p;
  ctx.workspace_bytes = rounded;
  return p;
}

int compute_capability(int device) {
  static std::mutex mu;
  static std::map<int, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int major = 0, minor = 0;
  KILN_CUDNN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "device ", device);
  KILN_CUDNN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "device ", device);
  return cache[device] = major * 10 + minor;
}

bool device_supports(DType t) {
  if (t == DType::float32) return true;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  int cc = 0;
  try {
    cc = compute_capability(device);
  } catch (const Error&) {
    return false;
  }
  if (t == DType::float16) return cc >= 60;
#if CUDNN_VERSION >= 8100
  if (t == DType::bfloat16) return cc >= 80;
#endif
  return false;
}

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::float32: return CUDNN_DATA_FLOAT;
    case DType::float64: return CUDNN_DATA_DOUBLE;
    case DType::float16: return CUDNN_DATA_HALF;
#if CUDNN_VERSION >= 8100
    case DType::bfloat16: return CUDNN_DATA_BFLOAT16;
#endif
    default: break;
  }
  KILN_THROW("cudnn backend: no cuDNN data type for ", dtype_name(t));
}

cudaDataType_t blas_data_type(DType t) {
  switch (t) {
    case DType::float32: return CUDA_R_32F;
    case DType::float64: return CUDA_R_64F;
    case DType::float16: return CUDA_R_16F;
    case DType::bfloat16: return CUDA_R_16BF;
    default: break;
  }
  KILN_THROW("cudnn backend: no cuBLAS data type for ", dtype_name(t));
}

const char* cublas_status_name(cublasStatus_t s) {
  // Spelled out: cublasGetStatusName only exists from cuBLAS 11.4.2.
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

bool is_not_supported(cudnnStatus_t s) {
#if CUDNN_VERSION >= 90000
  // cuDNN 9 groups statuses by thousands: 3000..3999 are NOT_SUPPORTED and its sub-codes.
  return int(s) / 1000 == int(CUDNN_STATUS_NOT_SUPPORTED) / 1000;
#else
  return s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

TensorDesc::TensorDesc() { KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d), "cudnn backend"); }
TensorDesc::~TensorDesc() {
  if (d) (void)cudnnDestroyTensorDescriptor(d);
}
void TensorDesc::set(DType t, const int dims[4], bool nhwc) { set(t, dims[0], dims[1], dims[2], dims[3], nhwc); }
void TensorDesc::set(DType t, int n, int c, int h, int w, bool nhwc) {
  KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, data_type(t), n, c, h, w),
                   "cudnn backend: tensor ", dtype_name(t), " [", n, ", ", c, ", ", h, ", ", w, "]",
                   nhwc ? " nhwc" : "");
}

namespace detail {

void throw_cudnn(cudnnStatus_t s, const char* call, const std::string& what, const char* file, int line) {
  std::string msg = ::kiln::detail::concat(call, " failed: ", cudnnGetErrorString(s), " (", int(s), ")");
#if CUDNN_VERSION >= 90000
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));
  if (last[0]) msg += ::kiln::detail::concat(": ", last);
#endif
  if (!what.empty()) msg += ::kiln::detail::concat(" [", what, "]");
  throw Error(msg, file, line);
}

void throw_cublas(cublasStatus_t s, const char* call, const std::string& what, const char* file, int line) {
  std::string msg = ::kiln::detail::concat(call, " failed: ", cublas_status_name(s), " (", int(s), ")");
  if (!what.empty()) msg += ::kiln::detail::concat(" [", what, "]");
  throw Error(msg, file, line);
}

void throw_cuda(cudaError_t e, const char* call, const std::string& what, const char* file, int line) {
  std::string msg = ::kiln::detail::concat(call, " failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  if (!what.empty()) msg += ::kiln::detail::concat(" [", what, "]");
  throw Error(msg, file, line);
}

}  // namespace detail

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
