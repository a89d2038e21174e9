// The stream-ordered CUDA caching allocator and the pinned host allocator
// (engine/cuda_allocator.h). Test: tests/engine/test_cuda_allocator.cpp (fake backend, no GPU);
// tests/gpu/test_gpu_allocator.cpp (a real device).
#include "engine/cuda_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/error.h"

namespace kiln::cuda {

namespace {

std::string format_bytes(int64_t b) {
  char buf[64];
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(int64_t(1) << 30));
  else if (b >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  return buf;
}

// One piece of a segment (one cudaMalloc). Blocks of a segment form a list in address order;
// a block with neither neighbour is a whole segment and can go back to the driver.
struct Block {
  int device = 0;
  Stream stream = nullptr;
  size_t size = 0;
  char* ptr = nullptr;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<Stream> stream_uses;  // other streams that used it (record_stream)
  int event_count = 0;              // events still pending since its free

  Block() = default;
  Block(int d, Stream s, size_t n, char* p, bool sm) : device(d), stream(s), size(n), ptr(p), small(sm) {}
};

// Pools are ordered by (stream, size, address): lower_bound finds the best fit on a stream.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<Stream>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return std::less<char*>()(a->ptr, b->ptr);
  }
};
using Pool = std::set<Block*, BlockLess>;

void update_peak(MemoryStats& s) { s.peak = std::max(s.peak, s.current); }

}  // namespace

size_t CudaCachingAllocator::round_size(size_t bytes) {
  if (bytes < kRound) return kRound;
  return (bytes + kRound - 1) / kRound * kRound;
}

size_t CudaCachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocatorOptions allocator_options_from_env() {
  CachingAllocatorOptions o;
  if (const char* e = std::getenv("KILN_CUDA_ALLOC")) {
    const std::string v(e);
    KILN_CHECK(v.empty() || v == "direct" || v == "caching", "KILN_CUDA_ALLOC='", v,
               "' is not a CUDA allocator mode (direct or caching)");
    o.caching = v != "direct";
  }
  return o;
}

struct CudaCachingAllocator::Impl {
  struct DeviceState {
    Pool small, large;
    MemoryStats stats;
  };

  std::unique_ptr<CudaAllocatorBackend> backend;
  CachingAllocatorOptions options;
  mutable std::mutex mu;
  std::map<int, DeviceState> devices;
  std::unordered_map<void*, Block*> allocated;
  std::deque<std::pair<void*, Block*>> events;  // (event, block) in the order recorded

  Pool& pool_of(const Block* b) { return b->small ? devices[b->device].small : devices[b->device].large; }

  // Back into its pool, merged with free neighbours (those not waiting on events).
  void free_block(Block* b) {
    Pool& pool = pool_of(b);
    if (Block* p = b->prev; p && !p->allocated && p->event_count == 0) {
      pool.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next) b->next->prev = p;
      delete b;
      b = p;
    }
    if (Block* n = b->next; n && !n->allocated && n->event_count == 0) {
      pool.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
    pool.insert(b);
  }

  void event_done(void* ev, Block* b) {
    backend->destroy_event(ev);
    if (--b->event_count == 0) {
      if (options.caching) {
        free_block(b);
      } else {
        release_direct(b);
      }
    }
  }

  void release_direct(Block* b) {
    backend->free(b->device, b->ptr);
    devices[b->device].stats.reserved -= int64_t(b->size);
    delete b;
  }

  // Lazily: blocks whose events have all completed become reusable.
  void process_events() {
    for (auto it = events.begin(); it != events.end();) {
      if (backend->query_event(it->first)) {
        event_done(it->first, it->second);
        it = events.erase(it);
      } else {
        ++it;
      }
    }
  }

  void synchronize_and_free_events() {
    while (!events.empty()) {
      auto [ev, b] = events.front();
      events.pop_front();
      backend->synchronize_event(ev);
      event_done(ev, b);
    }
  }

  // Returns whole free segments (of one device, or all when device < 0) to the driver.
  void release_cached(int device) {
    synchronize_and_free_events();
    for (auto& [d, st] : devices) {
      if (device >= 0 && d != device) continue;
      for (Pool* pool : {&st.small, &st.large}) {
        for (auto it = pool->begin(); it != pool->end();) {
          Block* b = *it;
          if (b->prev || b->next) {
            ++it;
            continue;
          }
          it = pool->erase(it);
          backend->free(b->device, b->ptr);
          st.stats.reserved -= int64_t(b->size);
          delete b;
        }
      }
    }
  }

  [[noreturn]] void throw_oom(int device, size_t bytes, size_t rounded, size_t segment) {
    const MemoryStats& s = devices[device].stats;
    KILN_THROW("CUDA out of memory on cuda:", device, ": tried to allocate ", format_bytes(int64_t(bytes)), " (",
               bytes, " bytes; a ", format_bytes(int64_t(segment)), " segment for ", rounded,
               " rounded) after releasing the cache; ", format_bytes(s.current), " (", s.current,
               " bytes) in use by tensors, ", format_bytes(s.reserved), " (", s.reserved,
               " bytes) reserved by kiln's CUDA allocator",
               options.caching ? "" : " (KILN_CUDA_ALLOC=direct: no cache)");
  }

  void* malloc_with_retry(int device, size_t bytes, size_t rounded, size_t segment) {
    void* p = backend->malloc(device, segment);
    if (!p) {
      release_cached(-1);
      p = backend->malloc(device, segment);
    }
    if (!p) throw_oom(device, bytes, rounded, segment);
    devices[device].stats.reserved += int64_t(segment);
    return p;
  }
};

CudaCachingAllocator::CudaCachingAllocator(std::unique_ptr<CudaAllocatorBackend> backend,
                                           CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->backend = std::move(backend);
  impl_->options = options;
}

CudaCachingAllocator::~CudaCachingAllocator() {
  try {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->release_cached(-1);
  } catch (...) {  // a failing driver at teardown: nothing left to do
  }
}

CudaCachingAllocator& CudaCachingAllocator::instance() {
  // Never destroyed: tensors may be freed during static teardown.
  static CudaCachingAllocator* a = new CudaCachingAllocator(make_runtime_backend(), allocator_options_from_env());
  return *a;
}

bool CudaCachingAllocator::caching() const { return impl_->options.caching; }

void* CudaCachingAllocator::allocate(size_t bytes, int device, Stream stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  m.process_events();
  if (bytes == 0) return nullptr;
  const size_t size = round_size(bytes);
  Impl::DeviceState& ds = m.devices[device];
  ds.stats.allocations += 1;

  Block* b = nullptr;
  if (!m.options.caching) {
    void* p = m.malloc_with_retry(device, bytes, size, size);
    b = new Block(device, stream, size, static_cast<char*>(p), size <= kSmallSize);
  } else {
    const bool small = size <= kSmallSize;
    Pool& pool = small ? ds.small : ds.large;
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == stream) {
      b = *it;
      pool.erase(it);
      ds.stats.cache_hits += 1;
    } else {
      const size_t seg = segment_size(size);
      void* p = m.malloc_with_retry(device, bytes, size, seg);
      b = new Block(device, stream, seg, static_cast<char*>(p), small);
    }
    const size_t rest = b->size - size;
    if (small ? rest >= kRound : rest > kSmallSize) {
      Block* r = new Block(device, stream, rest, b->ptr + size, small);
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      pool.insert(r);
    }
  }
  b->allocated = true;
  m.allocated[b->ptr] = b;
  ds.stats.current += int64_t(b->size);
  update_peak(ds.stats);
  trace::block_allocated(b->ptr, b->size, device, stream);
  return b->ptr;
}

void CudaCachingAllocator::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  auto it = m.allocated.find(p);
  KILN_CHECK(it != m.allocated.end(), "CudaCachingAllocator::free: pointer ", p, " was not allocated here");
  Block* b = it->second;
  m.allocated.erase(it);
  b->allocated = false;
  trace::block_freed(b->ptr, b->size);
  m.devices[b->device].stats.current -= int64_t(b->size);
  if (!b->stream_uses.empty()) {
    for (Stream s : b->stream_uses) {
      void* ev = m.backend->create_event(b->device);
      m.backend->record_event(ev, s);
      m.events.emplace_back(ev, b);
      b->event_count += 1;
    }
    b->stream_uses.clear();
    return;
  }
  if (m.options.caching)
    m.free_block(b);
  else
    m.release_direct(b);
}

void CudaCachingAllocator::record_stream(void* p, Stream stream) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->allocated.find(p);
  KILN_CHECK(it != impl_->allocated.end(), "CudaCachingAllocator::record_stream: pointer ", p,
             " is not an allocation of this allocator (pass the pointer allocate returned)");
  Block* b = it->second;
  if (stream == b->stream) return;
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

MemoryStats CudaCachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(device);
  return it == impl_->devices.end() ? MemoryStats{} : it->second.stats;
}

void CudaCachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  MemoryStats& s = impl_->devices[device].stats;
  s.peak = s.current;
}

void CudaCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->release_cached(-1);
}

// ---------------------------------------------------------------- pinned host memory

struct PinnedAllocator::Impl {
  struct HostBlock {
    size_t size = 0;
    bool allocated = false;
    int event_count = 0;
  };
  std::unique_ptr<CudaAllocatorBackend> backend;
  CachingAllocatorOptions options;
  mutable std::mutex mu;
  std::map<void*, HostBlock, std::less<>> blocks;  // ordered: interior pointers find their block
  std::map<size_t, std::vector<void*>> free_lists;  // by size class
  std::deque<std::pair<void*, void*>> events;       // (event, buffer)
  MemoryStats stats;

  // The live block holding `p` (its start or any byte inside), or end().
  std::map<void*, HostBlock, std::less<>>::iterator containing(const void* p) {
    auto it = blocks.upper_bound(const_cast<void*>(p));
    if (it == blocks.begin()) return blocks.end();
    --it;
    const char* base = static_cast<const char*>(it->first);
    const char* q = static_cast<const char*>(p);
    if (!it->second.allocated || q >= base + it->second.size) return blocks.end();
    return it;
  }

  static size_t size_class(size_t bytes) {
    size_t s = 512;
    while (s < bytes) s <<= 1;
    return s;
  }

  void make_free(void* p, HostBlock& b) {
    if (options.caching) {
      free_lists[b.size].push_back(p);
      return;
    }
    backend->host_free(p);
    stats.reserved -= int64_t(b.size);
    blocks.erase(p);
  }

  void event_done(void* ev, void* p) {
    backend->destroy_event(ev);
    HostBlock& b = blocks.at(p);
    if (--b.event_count == 0 && !b.allocated) make_free(p, b);
  }

  void process_events() {
    for (auto it = events.begin(); it != events.end();) {
      if (backend->query_event(it->first)) {
        event_done(it->first, it->second);
        it = events.erase(it);
      } else {
        ++it;
      }
    }
  }

  void release_cached() {
    while (!events.empty()) {
      auto [ev, p] = events.front();
      events.pop_front();
      backend->synchronize_event(ev);
      event_done(ev, p);
    }
    for (auto& [size, list] : free_lists) {
      for (void* p : list) {
        backend->host_free(p);
        stats.reserved -= int64_t(size);
        blocks.erase(p);
      }
    }
    free_lists.clear();
  }
};

PinnedAllocator::PinnedAllocator(std::unique_ptr<CudaAllocatorBackend> backend, CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->backend = std::move(backend);
  impl_->options = options;
}

PinnedAllocator::~PinnedAllocator() {
  try {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->release_cached();
  } catch (...) {
  }
}

PinnedAllocator& PinnedAllocator::instance() {
  static PinnedAllocator* a = new PinnedAllocator(make_runtime_backend(), allocator_options_from_env());
  return *a;
}

void* PinnedAllocator::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  m.process_events();
  if (bytes == 0) return nullptr;
  const size_t size = Impl::size_class(bytes);
  m.stats.allocations += 1;
  void* p = nullptr;
  auto fl = m.free_lists.find(size);
  if (fl != m.free_lists.end() && !fl->second.empty()) {
    p = fl->second.back();
    fl->second.pop_back();
    m.stats.cache_hits += 1;
  } else {
    p = m.backend->host_malloc(size);
    if (!p) {
      m.release_cached();
      p = m.backend->host_malloc(size);
    }
    KILN_CHECK(p, "pinned host memory exhausted: tried to allocate ", format_bytes(int64_t(size)), "; ",
               format_bytes(m.stats.current), " in use, ", format_bytes(m.stats.reserved), " reserved");
    m.stats.reserved += int64_t(size);
    m.blocks[p] = Impl::HostBlock{size, false, 0};
  }
  Impl::HostBlock& b = m.blocks.at(p);
  b.allocated = true;
  m.stats.current += int64_t(size);
  update_peak(m.stats);
  return p;
}

void PinnedAllocator::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  auto it = m.blocks.find(p);
  KILN_CHECK(it != m.blocks.end() && it->second.allocated, "PinnedAllocator::free: pointer ", p,
             " is not a live pinned allocation");
  it->second.allocated = false;
  m.stats.current -= int64_t(it->second.size);
  if (it->second.event_count == 0) m.make_free(p, it->second);
}

void PinnedAllocator::record_event(void* p, int device, Stream stream) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  auto it = m.containing(p);
  KILN_CHECK(it != m.blocks.end(), "PinnedAllocator::record_event: pointer ", p, " is not in a live pinned allocation");
  void* ev = m.backend->create_event(device);
  m.backend->record_event(ev, stream);
  m.events.emplace_back(ev, it->first);
  it->second.event_count += 1;
}

bool PinnedAllocator::is_pinned(const void* p) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->containing(p) != impl_->blocks.end();
}

MemoryStats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void PinnedAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->release_cached();
}

// ---------------------------------------------------------------- the CUDA runtime backend

#if defined(KILN_HAVE_CUDA)

namespace {
class RuntimeBackend final : public CudaAllocatorBackend {
 public:
  void* malloc(int device, size_t bytes) override {
    DeviceGuard g(device);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    KILN_CUDA_CHECK(e);
    return p;
  }
  void free(int device, void* p) override {
    DeviceGuard g(device);
    KILN_CUDA_CHECK(cudaFree(p));
  }
  void* host_malloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    KILN_CUDA_CHECK(e);
    return p;
  }
  void host_free(void* p) override { KILN_CUDA_CHECK(cudaFreeHost(p)); }
  void* create_event(int device) override {
    DeviceGuard g(device);
    cudaEvent_t e = nullptr;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void destroy_event(void* event) override { KILN_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }
  void record_event(void* event, Stream stream) override {
    KILN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), stream));
  }
  bool query_event(void* event) override {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    KILN_CUDA_CHECK(e);
    return true;
  }
  void synchronize_event(void* event) override {
    KILN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }
};
}  // namespace

std::unique_ptr<CudaAllocatorBackend> make_runtime_backend() { return std::make_unique<RuntimeBackend>(); }

#else

std::unique_ptr<CudaAllocatorBackend> make_runtime_backend() {
  KILN_THROW("CUDA allocator: kiln was built without CUDA");
}

#endif

}  // namespace kiln::cuda
