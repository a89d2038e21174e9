// Host memory for tensors: 64-byte aligned blocks (one cache line, the widest AVX-512 load) from a
// size-class cache, so the large activation buffers of a training step are reused instead of
// being unmapped and faulted in again every iteration. Thread-safe.
//
// The limit bounds the bytes held from the system, in use plus cached (default: half of physical
// memory, KILN_CPU_CACHE_LIMIT_MB to change it): a request the cache cannot serve first frees
// cached blocks of other sizes, largest first, until it fits, and frees beyond the limit go back
// to the system. So a training step's buffers are reused from one iteration to the next (VGG-11
// at batch 64 lost 8% to page faults when the limit counted only the free bytes and stopped
// caching), while a process running differently shaped nets does not hoard memory.
// KILN_CPU_ALLOC=direct turns the cache off (every free goes back to the system), for debugging.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct MemoryStats {
  int64_t current = 0;   // bytes handed out to tensors now
  int64_t peak = 0;      // highest `current` since the last reset_peak()
  int64_t reserved = 0;  // bytes held from the system (in use + cached)
  int64_t allocations = 0;
  int64_t cache_hits = 0;
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();

  // Returns 64-byte aligned memory of at least `bytes` (bytes may be 0). Throws kiln::Error when
  // the system has none left even after the cache is released.
  void* allocate(size_t bytes);
  void deallocate(void* p, size_t bytes);

  MemoryStats stats() const;
  void reset_peak();
  // Returns cached blocks to the system.
  void empty_cache();
  // Most bytes held from the system (in use + cached) before the cache gives blocks back.
  void set_cache_limit(int64_t bytes);
  int64_t cache_limit() const;
  int64_t cached_bytes() const;
  // Size class a request is rounded to (exposed for tests).
  static size_t round_size(size_t bytes);

 private:
  CpuAllocator();
  struct Impl;
  Impl* impl_;
};

}  // namespace kiln
