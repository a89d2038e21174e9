// CUDA device memory for tensors: a stream-ordered caching allocator after PyTorch's
// CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp, its header comment).
//  - Requests are rounded up to 512 bytes. Requests of at most 1 MiB come from the small pool,
//    carved out of 2 MiB segments; larger ones from the large pool (20 MiB segments below 10 MiB,
//    else the size rounded up to 2 MiB). cudaMalloc is called only when no cached block fits.
//  - Best fit: the smallest cached block of the same device, pool and stream that is big enough;
//    the remainder is split off (small pool: if at least 512 B remain; large: if more than 1 MiB)
//    and on free a block merges with free neighbours of its segment.
//  - Stream order: a block belongs to the stream it was allocated on, and is reused only by
//    allocations on that stream (work queued there runs in order, so reuse is safe without a
//    sync). A block used on other streams (record_stream) is, when freed, held until an event
//    recorded on each of those streams has completed; events are polled lazily, on the next
//    allocation, and waited for before memory is returned to the driver.
//  - Out of memory: the cache is released (after waiting for pending events) and cudaMalloc tried
//    again; then kiln::Error with the requested, in-use and reserved bytes.
//  - KILN_CUDA_ALLOC=direct turns caching off: every allocation is a cudaMalloc, every free a
//    cudaFree (after the pending events), for debugging with compute-sanitizer.
// Driver calls go through CudaAllocatorBackend so tests/engine/test_cuda_allocator.cpp runs the
// whole logic on the CPU with host memory and fake events. Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/allocator.h"
#include "engine/cuda_runtime.h"

namespace kiln::cuda {

// What the caching allocators need from the driver. Events are opaque handles.
class CudaAllocatorBackend {
 public:
  virtual ~CudaAllocatorBackend() = default;
  // Device memory; nullptr when the device is out of memory (other failures throw).
  virtual void* malloc(int device, size_t bytes) = 0;
  virtual void free(int device, void* p) = 0;
  // Page-locked host memory; nullptr when none can be had.
  virtual void* host_malloc(size_t bytes) = 0;
  virtual void host_free(void* p) = 0;
  virtual void* create_event(int device) = 0;
  virtual void destroy_event(void* event) = 0;
  virtual void record_event(void* event, Stream stream) = 0;
  virtual bool query_event(void* event) = 0;  // true when complete
  virtual void synchronize_event(void* event) = 0;
};

// The backend over the CUDA runtime (throws "built without CUDA" in builds without it).
std::unique_ptr<CudaAllocatorBackend> make_runtime_backend();

struct CachingAllocatorOptions {
  bool caching = true;  // false: KILN_CUDA_ALLOC=direct
};

class CudaCachingAllocator {
 public:
  static constexpr size_t kRound = 512;                 // every size is a multiple of this
  static constexpr size_t kSmallSize = 1 << 20;         // largest request of the small pool
  static constexpr size_t kSmallBuffer = 2 << 20;       // small pool segment
  static constexpr size_t kLargeBuffer = 20 << 20;      // large pool segment for requests < 10 MiB
  static constexpr size_t kMinLargeAlloc = 10 << 20;
  static constexpr size_t kRoundLarge = 2 << 20;

  CudaCachingAllocator(std::unique_ptr<CudaAllocatorBackend> backend, CachingAllocatorOptions options = {});
  ~CudaCachingAllocator();  // returns every cached segment; blocks still in use are leaked
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  // The process-wide allocator over the CUDA runtime (KILN_CUDA_ALLOC read on first use).
  static CudaCachingAllocator& instance();

  // Memory on `device` for work on `stream`; bytes may be 0 (returns nullptr).
  void* allocate(size_t bytes, int device, Stream stream);
  void free(void* p);
  // Marks `p` as used by work on `stream`: its reuse waits for that work when it is freed.
  void record_stream(void* p, Stream stream);

  MemoryStats stats(int device) const;
  void reset_peak(int device);
  // Returns every free cached segment to the driver (after pending events complete).
  void empty_cache();
  bool caching() const;

  static size_t round_size(size_t bytes);
  // Size of the segment cudaMalloc'd for a (rounded) request.
  static size_t segment_size(size_t rounded);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Page-locked host buffers for asynchronous copies, cached by size class (powers of two, like
// PyTorch's CachingHostAllocator). A freed buffer is reused only after the events recorded for
// the copies that used it (record_event) have completed. Thread-safe.
class PinnedAllocator {
 public:
  explicit PinnedAllocator(std::unique_ptr<CudaAllocatorBackend> backend, CachingAllocatorOptions options = {});
  ~PinnedAllocator();
  PinnedAllocator(const PinnedAllocator&) = delete;
  PinnedAllocator& operator=(const PinnedAllocator&) = delete;
  static PinnedAllocator& instance();

  void* allocate(size_t bytes);
  void free(void* p);
  // The buffer holding `p` (its start or any byte inside) is read or written by work queued on
  // `stream` of `device`: it is not reused before that work is done.
  void record_event(void* p, int device, Stream stream);
  // True when `p` points into a live buffer of this allocator.
  bool is_pinned(const void* p) const;
  MemoryStats stats() const;
  void empty_cache();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Options from KILN_CUDA_ALLOC ("direct" turns caching off; unset or "caching" keeps it).
CachingAllocatorOptions allocator_options_from_env();

}  // namespace kiln::cuda
