// The CUDA caching allocator's whole logic on the CPU: a fake backend hands out host memory under
// a capacity and fake events whose completion the test controls. Split and merge, pool choice,
// stream ownership, cross-stream reuse only after the events, OOM release-and-retry, statistics,
// direct mode, thread safety, and the pinned host allocator.
//   ctest --test-dir build -R engine.test_cuda_allocator
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/cuda_allocator.h"
#include "tests/support/testing.h"

using namespace kiln;
using namespace kiln::cuda;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

struct FakeEvent {
  Stream stream = nullptr;
  std::atomic<bool> done{true};
};

// Host memory as "device" memory, with a capacity; events complete when the test says so.
struct FakeBackend final : CudaAllocatorBackend {
  std::mutex mu;
  size_t capacity = size_t(1) << 34;
  size_t used = 0;
  std::map<void*, size_t> live;
  std::set<FakeEvent*> events;
  int mallocs = 0, frees = 0, host_mallocs = 0, host_frees = 0, syncs = 0;

  void* malloc(int, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu);
    if (used + bytes > capacity) return nullptr;
    void* p = std::malloc(bytes);
    live[p] = bytes;
    used += bytes;
    ++mallocs;
    return p;
  }
  void free(int, void* p) override {
    std::lock_guard<std::mutex> l(mu);
    REQUIRE(live.count(p));
    used -= live[p];
    live.erase(p);
    std::free(p);
    ++frees;
  }
  void* host_malloc(size_t bytes) override {
    ++host_mallocs;
    return std::malloc(bytes);
  }
  void host_free(void* p) override {
    ++host_frees;
    std::free(p);
  }
  void* create_event(int) override {
    std::lock_guard<std::mutex> l(mu);
    auto* e = new FakeEvent;
    events.insert(e);
    return e;
  }
  void destroy_event(void* e) override {
    std::lock_guard<std::mutex> l(mu);
    REQUIRE(events.erase(static_cast<FakeEvent*>(e)));
    delete static_cast<FakeEvent*>(e);
  }
  void record_event(void* e, Stream s) override {
    auto* ev = static_cast<FakeEvent*>(e);
    ev->stream = s;
    ev->done = false;
  }
  bool query_event(void* e) override { return static_cast<FakeEvent*>(e)->done; }
  void synchronize_event(void* e) override {
    ++syncs;
    static_cast<FakeEvent*>(e)->done = true;
  }
  // The device finishes the work queued on `s` (all streams when null).
  void complete(Stream s = nullptr) {
    std::lock_guard<std::mutex> l(mu);
    for (FakeEvent* e : events)
      if (!s || e->stream == s) e->done = true;
  }
};

Stream stream(int i) { return reinterpret_cast<Stream>(uintptr_t(0x1000 * i)); }

struct Fixture {
  FakeBackend* fake = new FakeBackend;
  CudaCachingAllocator alloc;
  explicit Fixture(bool caching = true)
      : alloc(std::unique_ptr<CudaAllocatorBackend>(fake), CachingAllocatorOptions{caching}) {}
};

}  // namespace

TEST_CASE("cuda allocator: sizes round to 512 B; segments by pool") {
  CHECK(CudaCachingAllocator::round_size(1) == 512);
  CHECK(CudaCachingAllocator::round_size(512) == 512);
  CHECK(CudaCachingAllocator::round_size(513) == 1024);
  CHECK(CudaCachingAllocator::segment_size(512) == 2 * kMiB);
  CHECK(CudaCachingAllocator::segment_size(kMiB) == 2 * kMiB);
  CHECK(CudaCachingAllocator::segment_size(kMiB + 512) == 20 * kMiB);
  CHECK(CudaCachingAllocator::segment_size(10 * kMiB) == 10 * kMiB);
  CHECK(CudaCachingAllocator::segment_size(11 * kMiB + 512) == 12 * kMiB);
}

TEST_CASE("cuda allocator: small requests share a 2 MiB segment, split and merged back") {
  Fixture f;
  Stream s = stream(1);
  char* a = static_cast<char*>(f.alloc.allocate(1000, 0, s));
  char* b = static_cast<char*>(f.alloc.allocate(3000, 0, s));
  char* c = static_cast<char*>(f.alloc.allocate(512, 0, s));
  CHECK(f.fake->mallocs == 1);
  CHECK(b == a + 1024);  // best fit from the split remainder, in address order
  CHECK(c == b + 3072);
  MemoryStats st = f.alloc.stats(0);
  CHECK(st.current == 1024 + 3072 + 512);
  CHECK(st.reserved == int64_t(2 * kMiB));
  CHECK(st.allocations == 3);
  CHECK(st.cache_hits == 2);

  f.alloc.free(b);
  // A request that fits the hole takes it (best fit) rather than the big remainder.
  char* d = static_cast<char*>(f.alloc.allocate(2000, 0, s));
  CHECK(d == b);
  f.alloc.free(d);
  f.alloc.free(a);
  f.alloc.free(c);  // a, b, c and the tail merge into one whole segment again
  CHECK(f.alloc.stats(0).current == 0);
  char* e = static_cast<char*>(f.alloc.allocate(kMiB, 0, s));
  CHECK(e == a);
  f.alloc.free(e);
  f.alloc.empty_cache();
  CHECK(f.fake->frees == 1);  // one segment: everything merged
  CHECK(f.alloc.stats(0).reserved == 0);
  CHECK(f.fake->live.empty());
}

TEST_CASE("cuda allocator: large pool, no split below 1 MiB remainder, best fit") {
  Fixture f;
  Stream s = stream(1);
  void* big = f.alloc.allocate(12 * kMiB, 0, s);  // own 12 MiB segment
  void* mid = f.alloc.allocate(3 * kMiB, 0, s);   // a 20 MiB segment, split 3 + 17
  CHECK(f.fake->mallocs == 2);
  CHECK(f.alloc.stats(0).reserved == int64_t(32 * kMiB));
  void* rest = f.alloc.allocate(17 * kMiB - 512 * 1024, 0, s);  // fits the 17 MiB tail, 0.5 MiB left: no split
  CHECK(f.fake->mallocs == 2);
  CHECK(f.alloc.stats(0).current == int64_t(32 * kMiB));
  f.alloc.free(big);
  f.alloc.free(rest);
  // 11 MiB: best fit is the 12 MiB segment, not the 17 MiB block.
  void* x = f.alloc.allocate(11 * kMiB, 0, s);
  CHECK(x == big);
  // Small requests never come from the large pool.
  void* small = f.alloc.allocate(100, 0, s);
  CHECK(f.fake->mallocs == 3);
  for (void* p : {x, mid, small}) f.alloc.free(p);
  f.alloc.empty_cache();
  CHECK(f.fake->live.empty());
}

TEST_CASE("cuda allocator: a block is reused only on its own stream") {
  Fixture f;
  void* a = f.alloc.allocate(4096, 0, stream(1));
  f.alloc.free(a);
  void* b = f.alloc.allocate(4096, 0, stream(2));
  CHECK(b != a);
  CHECK(f.fake->mallocs == 2);
  void* c = f.alloc.allocate(4096, 0, stream(1));
  CHECK(c == a);
  f.alloc.free(b);
  f.alloc.free(c);
}

TEST_CASE("cuda allocator: record_stream holds a freed block until every using stream's event completes") {
  Fixture f;
  Stream s1 = stream(1), s2 = stream(2), s3 = stream(3);
  void* a = f.alloc.allocate(kMiB, 0, s1);
  f.alloc.record_stream(a, s2);
  f.alloc.record_stream(a, s3);
  f.alloc.record_stream(a, s2);  // once per stream
  f.alloc.record_stream(a, s1);  // its own stream needs no event
  f.alloc.free(a);
  CHECK(f.fake->events.size() == 2);
  CHECK(f.alloc.stats(0).current == 0);

  void* b = f.alloc.allocate(kMiB, 0, s1);  // events pending: a is not reused
  CHECK(b != a);
  f.fake->complete(s2);
  void* c = f.alloc.allocate(kMiB, 0, s1);  // s3 still pending
  CHECK(c != a);
  f.alloc.free(c);
  f.fake->complete(s3);
  void* d = f.alloc.allocate(kMiB, 0, s1);  // events polled lazily here: a is back
  CHECK(d == a);
  CHECK(f.fake->events.empty());
  f.alloc.free(b);
  f.alloc.free(d);

  // empty_cache waits for pending events before giving memory back.
  void* e = f.alloc.allocate(kMiB, 0, s1);
  f.alloc.record_stream(e, s2);
  f.alloc.free(e);
  f.alloc.empty_cache();
  CHECK(f.fake->syncs == 1);
  CHECK(f.fake->live.empty());
  CHECK(f.alloc.stats(0).reserved == 0);
}

TEST_CASE("cuda allocator: out of memory releases the cache and retries, then names the bytes") {
  Fixture f;
  f.fake->capacity = 21 * kMiB;
  Stream s = stream(1);
  void* a = f.alloc.allocate(5 * kMiB, 0, s);  // a 20 MiB segment
  f.alloc.free(a);                             // cached
  void* b = f.alloc.allocate(1000, 0, s);      // needs 2 MiB more: the cached segment is released
  CHECK(b != nullptr);
  CHECK(f.fake->frees == 1);
  CHECK(f.alloc.stats(0).reserved == int64_t(2 * kMiB));
  CHECK_THROWS_KILN(f.alloc.allocate(30 * kMiB, 0, s), "CUDA out of memory on cuda:0: tried to allocate 30.00 MiB");
  try {
    f.alloc.allocate(30 * kMiB, 0, s);
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("1024 bytes) in use") != std::string::npos);
    CHECK(m.find("2097152 bytes) reserved") != std::string::npos);
  }
  f.alloc.free(b);
}

TEST_CASE("cuda allocator: statistics, peak reset, devices kept apart") {
  Fixture f;
  Stream s = stream(1);
  void* a = f.alloc.allocate(kMiB, 0, s);
  void* b = f.alloc.allocate(kMiB, 0, s);
  void* c = f.alloc.allocate(512, 1, s);
  f.alloc.free(a);
  MemoryStats st = f.alloc.stats(0);
  CHECK(st.current == int64_t(kMiB));
  CHECK(st.peak == int64_t(2 * kMiB));
  CHECK(st.reserved == int64_t(2 * kMiB));  // both halves of one small segment
  CHECK(st.allocations == 2);
  CHECK(st.cache_hits == 1);
  f.alloc.reset_peak(0);
  CHECK(f.alloc.stats(0).peak == int64_t(kMiB));
  void* d = f.alloc.allocate(kMiB, 0, s);  // from the cache
  CHECK(d == a);
  CHECK(f.alloc.stats(0).cache_hits == 2);
  CHECK(f.alloc.stats(1).current == 512);
  CHECK(f.alloc.stats(7).reserved == 0);
  CHECK(f.alloc.allocate(0, 0, s) == nullptr);
  f.alloc.free(nullptr);
  CHECK_THROWS_KILN(f.alloc.free(reinterpret_cast<void*>(0x42)), "was not allocated here");
  CHECK_THROWS_KILN(f.alloc.record_stream(reinterpret_cast<void*>(0x42), s), "is not an allocation");
  for (void* p : {b, c, d}) f.alloc.free(p);
}

TEST_CASE("cuda allocator: direct mode mallocs and frees every block, after its events") {
  Fixture f(/*caching=*/false);
  CHECK_FALSE(f.alloc.caching());
  Stream s = stream(1);
  void* a = f.alloc.allocate(1000, 0, s);
  CHECK(f.fake->live.at(a) == 1024);
  CHECK(f.alloc.stats(0).reserved == 1024);
  f.alloc.free(a);
  CHECK(f.fake->frees == 1);
  CHECK(f.alloc.stats(0).reserved == 0);
  void* b = f.alloc.allocate(3 * kMiB, 0, s);
  f.alloc.record_stream(b, stream(2));
  f.alloc.free(b);
  CHECK(f.fake->frees == 1);  // waits for stream 2
  f.fake->complete();
  void* c = f.alloc.allocate(512, 0, s);
  CHECK(f.fake->frees == 2);
  f.alloc.free(c);
  CHECK(f.fake->live.empty());
  CHECK(f.alloc.stats(0).cache_hits == 0);
}

TEST_CASE("cuda allocator: KILN_CUDA_ALLOC") {
  ::setenv("KILN_CUDA_ALLOC", "direct", 1);
  CHECK_FALSE(allocator_options_from_env().caching);
  ::setenv("KILN_CUDA_ALLOC", "caching", 1);
  CHECK(allocator_options_from_env().caching);
  ::setenv("KILN_CUDA_ALLOC", "bogus", 1);
  CHECK_THROWS_KILN(allocator_options_from_env(), "KILN_CUDA_ALLOC='bogus'");
  ::unsetenv("KILN_CUDA_ALLOC");
  CHECK(allocator_options_from_env().caching);
}

TEST_CASE("cuda allocator: concurrent allocate and free from several threads") {
  Fixture f;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng{unsigned(t)};
      std::vector<void*> held;
      for (int i = 0; i < 2000; ++i) {
        if (held.size() < 16 && (rng() % 3)) {
          const size_t n = (rng() % 2) ? rng() % (64 * 1024) + 1 : rng() % (3 * kMiB) + 1;
          void* p = f.alloc.allocate(n, 0, stream(1 + t % 2));
          std::memset(p, t, std::min<size_t>(n, 64));
          if (rng() % 4 == 0) f.alloc.record_stream(p, stream(3));
          held.push_back(p);
        } else if (!held.empty()) {
          const size_t k = rng() % held.size();
          if (static_cast<unsigned char*>(held[k])[0] != static_cast<unsigned char>(t)) failures++;
          f.alloc.free(held[k]);
          held.erase(held.begin() + long(k));
        }
        if (i % 97 == 0) f.fake->complete();
      }
      for (void* p : held) f.alloc.free(p);
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);  // no block was handed to two holders at once
  CHECK(f.alloc.stats(0).current == 0);
  f.alloc.empty_cache();
  CHECK(f.alloc.stats(0).reserved == 0);
  CHECK(f.fake->live.empty());
  CHECK(f.fake->events.empty());
}

TEST_CASE("pinned allocator: size classes, reuse only after the copy's event") {
  auto* fake = new FakeBackend;
  PinnedAllocator pinned{std::unique_ptr<CudaAllocatorBackend>(fake)};
  void* a = pinned.allocate(1000);
  CHECK(pinned.stats().current == 1024);
  pinned.free(a);
  void* b = pinned.allocate(600);  // same class, from the cache
  CHECK(b == a);
  CHECK(pinned.stats().cache_hits == 1);
  pinned.record_event(b, 0, stream(1));
  pinned.free(b);
  void* c = pinned.allocate(1024);  // b's copy is still in flight
  CHECK(c != b);
  fake->complete();
  void* d = pinned.allocate(1024);
  CHECK(d == b);
  CHECK(fake->host_mallocs == 2);
  CHECK(pinned.stats().peak == 2048);
  CHECK_THROWS_KILN(pinned.free(reinterpret_cast<void*>(0x42)), "not a live pinned allocation");
  // Interior pointers (a tensor's data at an offset) find their buffer.
  CHECK(pinned.is_pinned(static_cast<char*>(c) + 1000));
  CHECK_FALSE(pinned.is_pinned(static_cast<char*>(c) + 1024));
  CHECK_FALSE(pinned.is_pinned(&fake));
  pinned.record_event(static_cast<char*>(d) + 10, 0, stream(2));
  pinned.free(d);
  CHECK_FALSE(pinned.is_pinned(d));
  void* e = pinned.allocate(1024);
  CHECK(e != d);  // held for stream 2's copy
  fake->complete();
  pinned.free(e);
  pinned.free(c);
  pinned.empty_cache();
  CHECK(fake->host_frees == 3);
  CHECK(pinned.stats().reserved == 0);
}
