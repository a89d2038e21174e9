// Host memory for tensors: 64-byte aligned blocks (one cache line, the widest AVX-512 load) from a
// size-class cache, so the large activation buffers of a training step are reused instead of
// being unmapped and faulted in again every iteration. Thread-safe.
//
// The cache holds at most a limit of free bytes (default: a quarter of physical memory,
// KILN_CPU_CACHE_LIMIT_MB to change it); a freed block that would exceed it goes back to the
// system, so a process that runs many differently shaped nets does not hoard memory.
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
  // Most free bytes the cache keeps.
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
