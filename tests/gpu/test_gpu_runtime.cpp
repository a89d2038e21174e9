// The CUDA runtime on a real device: properties, streams and the per-thread current stream,
// events (query, wait, timing), pinned buffers with asynchronous copies, device by local rank.
//   ctest --test-dir build -L gpu
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/cuda_allocator.h"
#include "engine/cuda_runtime.h"
#include "tests/support/testing.h"

using namespace kiln;
using namespace kiln::cuda;

TEST_CASE("gpu runtime: devices and versions") {
  REQUIRE(device_count() > 0);
  const DeviceProperties p = device_properties(0);
  CHECK_FALSE(p.name.empty());
  CHECK(p.total_memory > (size_t(1) << 28));
  CHECK(p.major >= 3);
  CHECK(p.sm_count > 0);
  const Versions v = versions();
  CHECK(v.runtime > 0);
  CHECK(v.driver >= v.runtime / 1000 * 1000);  // a driver at least as new as the runtime's major
  CHECK_THROWS_KILN(device_properties(device_count()), "does not exist");
}

TEST_CASE("gpu runtime: the current stream is per thread and per device") {
  CudaStream s;
  CHECK(current_stream() == nullptr);
  {
    StreamGuard g(s);
    CHECK(current_stream() == s.stream());
    Stream other = reinterpret_cast<Stream>(1);
    std::thread([&] { other = current_stream(); }).join();
    CHECK(other == nullptr);
  }
  CHECK(current_stream() == nullptr);
  CHECK(s.query());
}

TEST_CASE("gpu runtime: pinned buffers, async copies, events and their timing") {
  const size_t n = size_t(16) << 20;
  PinnedAllocator& pinned = PinnedAllocator::instance();
  auto* src = static_cast<unsigned char*>(pinned.allocate(n));
  auto* dst = static_cast<unsigned char*>(pinned.allocate(n));
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7);
  std::memset(dst, 0, n);
  CudaStream s;
  void* dev = CudaCachingAllocator::instance().allocate(n, 0, s.stream());
  CudaEvent start, stop;
  start.record(s.stream());
  memcpy_async(dev, src, n, s.stream());
  memcpy_async(dst, dev, n, s.stream());
  stop.record(s.stream());
  pinned.record_event(src, 0, s.stream());
  stop.synchronize();
  CHECK(stop.query());
  CHECK(std::memcmp(src, dst, n) == 0);
  const float ms = stop.elapsed_ms(start);
  CHECK(ms > 0.0f);
  MESSAGE("16 MiB H2D + D2H through pinned memory: " << ms << " ms (" << 2.0 * double(n) / 1e6 / double(ms)
                                                      << " GB/s)");
  // Another stream waits on the event without the host blocking.
  CudaStream s2;
  stop.wait(s2.stream());
  s2.synchronize();
  CudaCachingAllocator::instance().free(dev);
  pinned.free(src);
  pinned.free(dst);
  void* again = pinned.allocate(n);  // the copy's event is done: the buffer comes back
  CHECK((again == src || again == dst));
  pinned.free(again);
}

TEST_CASE("gpu runtime: device by local rank") {
  ::setenv("SLURM_LOCALID", "0", 1);
  CHECK(select_device_by_local_rank() == 0);
  CHECK(current_device() == 0);
  ::unsetenv("SLURM_LOCALID");
}
