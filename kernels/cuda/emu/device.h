// The emulated CUDA device (build option KILN_EMU_DEVICE, preset `emu-device`): `cuda:N` on a
// machine without a GPU, so the whole GPU path (runtime, caching allocator, copies, pinned memory,
// the ops' device code, nets, Trainer, GradScaler, the loader, MPI with CUDA tensors) runs in CI.
// kernels/cuda/emu/include/cuda_runtime_api.h serves the runtime API from here; kiln's own kernels
// (kernels/cuda/native/*.cu, compiled as C++ against the emulator, kernels/cuda/emu/emu.h) run
// through launch(). cuDNN, cuBLAS and NCCL do not exist in this build.
//
// What a GPU would punish, it catches:
//  - Host access to device memory. Each device's memory is one mapping that is inaccessible
//    (PROT_NONE) except while a kernel, a copy or a memset runs; a host load or store elsewhere
//    faults at once, and the fault handler names the address, the allocation, read or write, and
//    the call stack, then the process dies of SIGSEGV as on a real fault.
//  - Unsynchronised use across streams (the stream sanitizer, after PyTorch's CSAN). Work runs
//    when it is issued, but every stream keeps a vector clock: each kernel, copy or memset is one
//    step of its stream; cudaEventRecord captures the stream's clock, cudaStreamWaitEvent joins
//    it; stream, event and device synchronisation join it into the host's clock, which every later
//    operation starts from; the legacy default stream orders itself with blocking streams. Each
//    allocation (a cudaMalloc region, or a block of the caching allocator, reported through
//    kiln::cuda::trace) remembers its last write and the last read per stream. A kernel's pointer
//    arguments are its accesses (a `const T*` reads, a `T*` writes, and the pointer fields a struct
//    argument declares with emu_accesses); a copy reads its source and writes its destination. An
//    access not ordered after a conflicting one on another stream throws kiln::Error naming both.
//    So does reusing a freed block on a stream that is not ordered after its last use, and a kernel
//    given a pointer into freed or unallocated device memory, or another device's.
//  - Launch configurations past the emulated architecture's limits (KILN_EMU_ARCH, default sm_90:
//    threads per block, grid, dynamic shared memory and its opt-in), as cudaLaunchKernel and
//    cudaFuncSetAttribute fail on that device.
//
// Environment: KILN_EMU_DEVICES (devices, default 2), KILN_EMU_DEVICE_MEMORY (bytes per device,
// with K/M/G suffix, default 4G), KILN_EMU_ARCH (sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_89
// sm_90; default sm_90).
// Limits: one operation runs at a time (a process-wide lock); while one runs, device memory is
// accessible to every host thread, so a fault is certain only for accesses made while the device
// is idle. Pinned host buffers are ordinary host memory and their reuse is not tracked.
// Tests: tests/emu_device/ (ctest --test-dir build-emu-device -L emu_device) and tests/gpu.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace kiln::cuda::emu_device {

// One pointer a kernel is given: `write` when it may store through it; `exact` for a pointer
// parameter (a pointer into device memory that is not allocated is an error), not for a pointer
// field of a struct parameter (checked only where it points into allocated memory).
struct Arg {
  const void* ptr;
  bool write;
  bool exact;
};

class Args;

namespace detail {
template <class U, class = void>
struct has_emu_accesses : std::false_type {};
template <class U>
struct has_emu_accesses<U, std::void_t<decltype(emu_accesses(std::declval<const U&>(), std::declval<Args&>()))>>
    : std::true_type {};
}  // namespace detail

// The accesses of one launch, gathered from its parameters by launch.h. A pointer parameter is
// one access (`const T*` reads). A struct parameter that carries pointers declares them with a
// function `void emu_accesses(const S&, Args&)` found by argument-dependent lookup (GemmArgs,
// BnArgs), calling field() per pointer; other structs carry none (their bytes are not scanned:
// padding holds stale words that look like addresses).
class Args {
 public:
  template <class T>
  void add(const T& param) {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_pointer_v<U>) {
      using Pointee = std::remove_pointer_t<U>;
      if (param) list_.push_back(Arg{static_cast<const void*>(param), !std::is_const_v<Pointee>, true});
    } else if constexpr (std::is_class_v<U> && detail::has_emu_accesses<U>::value) {
      emu_accesses(param, *this);
    }
  }
  // A pointer field of a struct parameter: an access when it points into allocated device memory
  // (a field the kernel does not use may hold anything).
  template <class P>
  void field(const P* p) {
    if (p) list_.push_back(Arg{static_cast<const void*>(p), !std::is_const_v<P>, false});
  }
  const std::vector<Arg>& list() const { return list_; }

 private:
  std::vector<Arg> list_;
};

// Runs `run(ctx)` (the emulator's grid) as kernel `name` on `stream` of the current device: checks
// and records its accesses first, and makes device memory accessible while it runs.
void launch(const char* name, Stream stream, const Args& args, void (*run)(void*), void* ctx);

// The emulated architecture's limits (KILN_EMU_ARCH).
struct Arch {
  int major = 9, minor = 0;
  size_t max_shared_optin = 227 * 1024;  // dynamic shared memory a kernel may opt in to
};
const Arch& arch();

// Installs the host-access fault handler again, keeping whatever SIGSEGV handler it replaces for
// faults elsewhere. The runtime installs it on first use; a program or framework that installs its
// own SIGSEGV handler later (a test runner, say) calls this after it.
void install_fault_handler();

// True when `p` lies in an emulated device's memory (allocated or not).
bool is_device_pointer(const void* p);
// The number of checks the sanitizer made and the races it reported, for tests.
struct SanitizerStats {
  uint64_t accesses = 0;
  uint64_t races = 0;
};
SanitizerStats sanitizer_stats();

}  // namespace kiln::cuda::emu_device
