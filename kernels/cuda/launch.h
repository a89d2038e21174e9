// The one header kiln's own CUDA kernels (kernels/cuda/native/*.cu) include. Under nvcc it is
// plain CUDA; with KILN_CUDA_EMU the same sources compile as C++ against the emulator
// (kernels/cuda/emu/emu.h), which is how CI runs them without a GPU (tests/emu/).
//
//   KILN_GLOBAL void k(...)              a kernel
//   KILN_DEVICE float f(...)             a device helper (KILN_HOST_DEVICE: shared with the CPU)
//   KILN_SHARED float tile[32][33];      static shared memory
//   KILN_DYNAMIC_SHARED(float, buf);     float* buf: the launch's dynamic shared memory
//   KILN_LAUNCH((k<float, 4>), grid, block, shmem, stream, args...)  checked launch, named in errors
//
// launch() checks the bounds (threads per block, grid dims, shared memory) and the launch's
// error and throws kiln::Error naming the kernel. Host wrappers live in KILN_CUDA_NAMESPACE.
// In the emulated-device build (KILN_EMU_DEVICE, kernels/cuda/emu/device.h) the emulator runs the
// launch on the stream it names, after the stream sanitizer has checked its pointer arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "kernels/common/error.h"
#include "kernels/common/host_device.h"
#include "kernels/cuda/namespace.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define KILN_GLOBAL __global__
#define KILN_SHARED __shared__
#define KILN_DYNAMIC_SHARED(T, name)                                  \
  extern __shared__ __align__(16) unsigned char kiln_dynamic_smem_[]; \
  T* name = reinterpret_cast<T*>(kiln_dynamic_smem_)
#elif defined(KILN_CUDA_EMU)
#include "kernels/cuda/emu/emu.h"
#define KILN_GLOBAL
// Shared by the fibers of a block; blocks run one after another, so one copy serves the grid.
// The section lets the emulator fill static shared memory with NaN bytes as each block starts,
// so a read before any thread wrote shows up. GCC ignores the section for statics of templates
// and inline functions (COMDAT): those keep what the previous block left (dynamic shared memory
// is always refilled).
#define KILN_SHARED static __attribute__((section("kiln_emu_shared")))
#define KILN_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::kiln::cuda::emu::detail::dynamic_shared())
#else
#error "kernels/cuda/launch.h is for .cu files (nvcc) and the emulator build (KILN_CUDA_EMU)"
#endif

#if defined(__CUDACC__) || defined(KILN_EMU_DEVICE)
// kiln::cuda::Stream (== cudaStream_t) and current_stream(): the CUDA runtime's, per device and
// thread (kernels/cuda/runtime.cpp). Declared outside the inline namespace, so kernels and the
// engine mean the same function.
#include "kernels/cuda/runtime.h"
#endif
#if defined(KILN_EMU_DEVICE)
#include "kernels/cuda/emu/device.h"
#endif

KILN_CUDA_NAMESPACE_BEGIN

#if !defined(__CUDACC__) && !defined(KILN_EMU_DEVICE)
// The emulator's stream: launches run synchronously on its null stream (current_stream.cu).
using Stream = EmuStream*;
Stream current_stream();
#endif

constexpr size_t kDefaultMaxDynamicShared = 48 * 1024;

// The most blocks a grid-stride loop's launch takes (KILN_GRID_STRIDE_CAP(8192)). A GPU wants
// thousands; the emulator runs a block's threads one after another, so there 64 blocks do the same
// work with each thread looping over more items and far fewer thread switches (about 10x faster
// for elementwise, copy and optimizer kernels). Only for kernels correct for any grid.
#if defined(__CUDACC__)
#define KILN_GRID_STRIDE_CAP(n) (n)
#else
#define KILN_GRID_STRIDE_CAP(n) ((n) < 64 ? (n) : 64)
#endif

namespace detail {

struct SharedOptIn {
  std::mutex mu;
  std::unordered_map<const void*, size_t> bytes;
};
inline SharedOptIn& shared_opt_in() {
  static SharedOptIn s;
  return s;
}
inline size_t max_dynamic_shared(const void* kernel) {
  SharedOptIn& s = shared_opt_in();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.bytes.find(kernel);
  return it == s.bytes.end() ? kDefaultMaxDynamicShared : it->second;
}

inline void check_launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t shmem) {
  const char* n = name ? name : "?";
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  KILN_CHECK(threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64,
             "launch of kernel '", n, "': block (", block.x, ",", block.y, ",", block.z,
             ") exceeds the launch bounds (1..1024 threads; x,y <= 1024, z <= 64)");
  KILN_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535,
             "launch of kernel '", n, "': grid (", grid.x, ",", grid.y, ",", grid.z,
             ") exceeds the launch bounds (x < 2^31, y,z <= 65535, none 0)");
  const size_t limit = max_dynamic_shared(kernel);
  KILN_CHECK(shmem <= limit, "launch of kernel '", n, "': ", shmem, " bytes of dynamic shared memory exceed the ",
             limit, " allowed (set_max_dynamic_shared opts in to more)");
}

}  // namespace detail

// Opts `kernel` in to more than 48 KiB of dynamic shared memory (cudaFuncSetAttribute on a GPU).
template <class... P>
void set_max_dynamic_shared(void (*kernel)(P...), size_t bytes) {
#if defined(__CUDACC__) || defined(KILN_EMU_DEVICE)
  cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  KILN_CHECK(e == cudaSuccess, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, ", bytes,
             "): ", cudaGetErrorString(e));
#endif
  detail::SharedOptIn& s = detail::shared_opt_in();
  std::lock_guard<std::mutex> lock(s.mu);
  s.bytes[reinterpret_cast<const void*>(kernel)] = bytes;
}

// Launches kernel<<<grid, block, shmem, s>>>(args...) with the checks above; `name` names it in
// errors (KILN_LAUNCH passes the kernel's spelling).
template <class... P, class... A>
void launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, Stream s,
                  A... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: argument count differs from the kernel's parameters");
  detail::check_launch(name, reinterpret_cast<const void*>(kernel), grid, block, shmem);
#if defined(__CUDACC__)
  kernel<<<grid, block, shmem, s>>>(args...);
  const cudaError_t e = cudaGetLastError();
  KILN_CHECK(e == cudaSuccess, "launch of kernel '", name ? name : "?", "' grid (", grid.x, ",", grid.y, ",", grid.z,
             ") block (", block.x, ",", block.y, ",", block.z, ") shmem ", shmem, ": ", cudaGetErrorString(e));
#else
  struct Ctx {
    const char* name;
    dim3 grid, block;
    size_t shmem;
    void (*kernel)(P...);
    std::tuple<P...> params;
  } ctx{name, grid, block, shmem, kernel, std::tuple<P...>(args...)};
  auto run = [](void* c) {
    auto* x = static_cast<Ctx*>(c);
    emu::detail::run_grid(
        x->name, x->grid, x->block, x->shmem, [](void* c2) {
          auto* y = static_cast<Ctx*>(c2);
          std::apply(y->kernel, y->params);
        },
        x);
  };
#if defined(KILN_EMU_DEVICE)
  emu_device::Args accesses;
  std::apply([&](const auto&... p) { (accesses.add(p), ...); }, ctx.params);
  emu_device::launch(name, s, accesses, run, &ctx);
#else
  (void)s;
  run(&ctx);
#endif
#endif
}

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, Stream s, A... args) {
  launch_named(nullptr, kernel, grid, block, shmem, s, args...);
}

// Temporary device memory for one operation on stream s (freed in stream order). The GPU build
// uses the driver's stream-ordered pool until the runtime's caching allocator takes this over.
class Scratch {
 public:
  Scratch(size_t bytes, Stream s) : stream_(s) {
    if (bytes == 0) return;
#if defined(__CUDACC__) || defined(KILN_EMU_DEVICE)
#if CUDART_VERSION >= 11020
    cudaError_t e = cudaMallocAsync(&ptr_, bytes, s);
    if (e == cudaErrorNotSupported) {
      // A driver or device without stream-ordered memory pools (older drivers for the K80):
      // plain cudaMalloc, freed after the stream drains.
      (void)cudaGetLastError();
      sync_free_ = true;
      e = cudaMalloc(&ptr_, bytes);
    }
#else
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
#endif
    KILN_CHECK(e == cudaSuccess, "scratch of ", bytes, " bytes on the GPU: ", cudaGetErrorString(e));
#else
    host_.reset(new unsigned char[bytes]);
    ptr_ = host_.get();
#endif
  }
  ~Scratch() {
#if defined(__CUDACC__) || defined(KILN_EMU_DEVICE)
    if (!ptr_) return;
#if CUDART_VERSION >= 11020
    if (!sync_free_) {
      cudaFreeAsync(ptr_, stream_);
      return;
    }
#endif
    cudaStreamSynchronize(stream_);
    cudaFree(ptr_);
#endif
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  Stream stream_;
  bool sync_free_ = false;  // cudaMalloc'ed (no stream-ordered pool): free after a stream sync
#if !defined(__CUDACC__) && !defined(KILN_EMU_DEVICE)
  std::unique_ptr<unsigned char[]> host_;
#endif
};

KILN_CUDA_NAMESPACE_END

// Template kernels go in parentheses: KILN_LAUNCH((k<float, 4>), grid, block, 0, s, args...).
#define KILN_LAUNCH(kernel, ...) ::kiln::cuda::launch_named(#kernel, kernel, __VA_ARGS__)
