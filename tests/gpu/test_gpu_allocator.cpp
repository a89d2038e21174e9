// The caching allocator on a real device: reuse, statistics, empty_cache, cross-stream
// record_stream, the out-of-memory message, direct mode.
//   ctest --test-dir build -L gpu
#include <vector>

#include "engine/cuda_allocator.h"
#include "engine/cuda_runtime.h"
#include "tests/support/testing.h"

using namespace kiln;
using namespace kiln::cuda;

TEST_CASE("gpu allocator: freed blocks are reused on their stream, counted in the stats") {
  CudaCachingAllocator a(make_runtime_backend());
  void* p = a.allocate(1 << 20, 0, nullptr);
  a.free(p);
  void* q = a.allocate(1000, 0, nullptr);
  CHECK(q == p);
  MemoryStats st = a.stats(0);
  CHECK(st.current == 1024);
  CHECK(st.peak == 1 << 20);
  CHECK(st.reserved == 2 << 20);
  CHECK(st.cache_hits == 1);
  std::vector<char> host(1000, 1);
  memcpy_async(q, host.data(), host.size(), nullptr);
  stream_synchronize(nullptr);
  a.free(q);
  a.empty_cache();
  CHECK(a.stats(0).reserved == 0);
}

TEST_CASE("gpu allocator: a block used on another stream waits for that stream") {
  CudaCachingAllocator a(make_runtime_backend());
  CudaStream s1, s2;
  void* p = a.allocate(8 << 20, 0, s1.stream());
  std::vector<char> host(8 << 20, 0);
  memcpy_async(p, host.data(), host.size(), s2.stream());
  a.record_stream(p, s2.stream());
  a.free(p);
  s2.synchronize();
  void* q = a.allocate(8 << 20, 0, s1.stream());  // the event is complete now
  CHECK(q == p);
  a.free(q);
}

TEST_CASE("gpu allocator: out of memory names the request and the reserve") {
  CudaCachingAllocator a(make_runtime_backend());
  CHECK_THROWS_KILN(a.allocate(size_t(1) << 50, 0, nullptr), "CUDA out of memory on cuda:0: tried to allocate");
  void* p = a.allocate(4096, 0, nullptr);  // still usable afterwards
  a.free(p);
}

TEST_CASE("gpu allocator: direct mode") {
  CudaCachingAllocator a(make_runtime_backend(), CachingAllocatorOptions{false});
  void* p = a.allocate(4096, 0, nullptr);
  CHECK(a.stats(0).reserved == 4096);
  a.free(p);
  CHECK(a.stats(0).reserved == 0);
}

TEST_CASE("gpu allocator: tensors allocate through the process-wide allocator") {
  CudaCachingAllocator& a = CudaCachingAllocator::instance();
  const int64_t before = a.stats(0).current;
  {
    Tensor t = empty({256, 256}, Device("cuda:0"));
    CHECK(a.stats(0).current == before + 256 * 256 * 4);
  }
  CHECK(a.stats(0).current == before);
}
