#include "engine/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unistd.h>
#include <vector>

#include "engine/error.h"
#include "kernels/common/env.h"

namespace kiln {

namespace {
constexpr size_t kAlign = 64;
}

struct CpuAllocator::Impl {
  mutable std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // size class -> cached blocks
  MemoryStats st;
  int64_t cached_bytes = 0;
  int64_t cache_limit = 0;
  bool caching = true;

  void release_all() {
    for (auto& [size, blocks] : free_blocks) {
      for (void* p : blocks) std::free(p);
      st.reserved -= int64_t(size * blocks.size());
    }
    free_blocks.clear();
    cached_bytes = 0;
  }
  // Frees cached blocks, largest first, until `reserved + need` fits the limit (or none is left).
  void release_for(size_t need) {
    for (auto it = free_blocks.rbegin(); it != free_blocks.rend() && st.reserved + int64_t(need) > cache_limit; ++it) {
      auto& blocks = it->second;
      while (!blocks.empty() && st.reserved + int64_t(need) > cache_limit) {
        std::free(blocks.back());
        blocks.pop_back();
        st.reserved -= int64_t(it->first);
        cached_bytes -= int64_t(it->first);
      }
    }
  }
};

CpuAllocator::CpuAllocator() : impl_(new Impl) {
  impl_->caching = env_choice("KILN_CPU_ALLOC", {"direct", "caching"}) != "direct";
  if (const int64_t mb = env_int("KILN_CPU_CACHE_LIMIT_MB", 0, int64_t(1) << 30, -1); mb >= 0) {
    impl_->cache_limit = mb << 20;
  } else {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    impl_->cache_limit = pages > 0 && page > 0 ? int64_t(pages) * page / 2 : int64_t(8) << 30;
  }
}

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator* a = new CpuAllocator();  // never destroyed: tensors may outlive statics
  return *a;
}

// Small requests round to a multiple of 64 B below 4 KiB, then to 1/8-power-of-two steps, so the
// waste is at most 12.5% and a block is reused by requests of nearly the same size.
size_t CpuAllocator::round_size(size_t bytes) {
  if (bytes <= 4096) return std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  size_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

void* CpuAllocator::allocate(size_t bytes) {
  size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& st = impl_->st;
  void* p = nullptr;
  if (impl_->caching) {
    auto it = impl_->free_blocks.find(size);
    if (it != impl_->free_blocks.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      impl_->cached_bytes -= int64_t(size);
      ++st.cache_hits;
    }
  }
  if (!p) {
    // A miss: make room under the limit from blocks of other sizes before asking the system.
    if (impl_->caching) impl_->release_for(size);
    p = std::aligned_alloc(kAlign, size);
    if (!p) {  // free the cache and retry once
      impl_->release_all();
      p = std::aligned_alloc(kAlign, size);
    }
    KILN_CHECK(p, "CpuAllocator: out of memory allocating ", bytes, " bytes (", st.current,
               " bytes in use)");
    st.reserved += int64_t(size);
  }
  ++st.allocations;
  st.current += int64_t(size);
  st.peak = std::max(st.peak, st.current);
  return p;
}

void CpuAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->st.current -= int64_t(size);
  if (impl_->caching && impl_->st.reserved <= impl_->cache_limit) {
    impl_->free_blocks[size].push_back(p);
    impl_->cached_bytes += int64_t(size);
  } else {
    std::free(p);
    impl_->st.reserved -= int64_t(size);
  }
}

MemoryStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->st;
}

void CpuAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->st.peak = impl_->st.current;
}

void CpuAllocator::set_cache_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cache_limit = bytes;
  if (impl_->cached_bytes > bytes) impl_->release_all();
}

int64_t CpuAllocator::cache_limit() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cache_limit;
}

int64_t CpuAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cached_bytes;
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->release_all();
}

}  // namespace kiln
