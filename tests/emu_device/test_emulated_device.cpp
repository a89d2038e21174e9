// The emulated CUDA device (kernels/cuda/emu/device.h, preset emu-device): its runtime, and the
// three kinds of bug it exists to catch, each planted here and shown caught:
//  (a) host access to device memory: faults at once, naming the address and the host function;
//  (b) unsynchronised use across streams: a kernel on one stream reading what a kernel on another
//      stream wrote with no event wait between them, and a block freed and reused while another
//      stream may still use it; the correct versions (an event wait, record_stream) pass;
//  (c) launch configurations past the emulated architecture's limits (the sm_70 case runs under
//      KILN_EMU_ARCH=sm_70: ctest emu_device.launch_limits_sm_70).
//   ctest --test-dir build-emu-device -L emu_device --output-on-failure
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "engine/cuda_copy.h"
#include "engine/cuda_runtime.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/tensor.h"
#include "kernels/cuda/emu/device.h"

// The planted kernels: compiled against the emulator as the library's own kernels are.
#define KILN_CUDA_EMU 1
#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
KILN_GLOBAL void planted_scale(float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= 2.0f;
}

KILN_GLOBAL void planted_shared(float* x) {
  KILN_DYNAMIC_SHARED(float, buf);
  buf[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  x[threadIdx.x] = buf[threadIdx.x];
}
KILN_CUDA_NAMESPACE_END

namespace {

using namespace kiln;
using cuda::dim3;
using cuda::planted_scale;
using cuda::planted_shared;

const Device kCuda0("cuda:0");

Tensor filled(float v, int64_t n = 256) { return full({n}, v, TensorOptions(DType::float32).with_device(kCuda0)); }

// Runs `body` in a child process; returns its stderr and how it ended.
struct Child {
  std::string err;
  int signal = 0;
  int code = -1;
};
template <class F>
Child in_child(F&& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    body();
    _exit(0);
  }
  close(fds[1]);
  Child c;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) c.err.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) c.signal = WTERMSIG(status);
  if (WIFEXITED(status)) c.code = WEXITSTATUS(status);
  return c;
}

}  // namespace

// (a) The planted host accesses: the engine bug class "read device memory on the host" (external
// linkage, so the fault's stack can name them).
__attribute__((noinline)) float planted_host_read(const kiln::Tensor& t) {
  return *static_cast<const volatile float*>(t.data_ptr());
}
__attribute__((noinline)) void planted_host_write(kiln::Tensor& t) {
  *static_cast<volatile float*>(t.data_ptr()) = 1.0f;
}

TEST_CASE("the emulated device: devices, properties, copies, events") {
  REQUIRE(cuda::device_count() >= 2);
  const cuda::DeviceProperties p = cuda::device_properties(1);
  CHECK(p.name.find("emulated") != std::string::npos);
  CHECK(p.major == cuda::emu_device::arch().major);
  Tensor h = arange(300, TensorOptions(DType::float32));
  Tensor d0 = h.to(kCuda0);
  CHECK(cuda::emu_device::is_device_pointer(d0.data_ptr()));
  Tensor d1 = d0.to(Device("cuda:1"));  // peer copy
  Tensor back = d1.to(Device());
  const std::vector<double> v = back.to_vector();
  REQUIRE(v.size() == 300);
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == double(i));
  cuda::CudaEvent a, b;
  a.record();
  ops::mul(d0, d0);
  b.record();
  b.synchronize();
  CHECK(b.elapsed_ms(a) >= 0.0f);
}

TEST_CASE("planted (a): a host read of device memory faults and names the place") {
  Tensor t = filled(3.0f);
  const Child c = in_child([&] { std::printf("%f\n", double(planted_host_read(t))); });
  INFO(c.err);
  CHECK(c.signal == SIGSEGV);
  CHECK(c.err.find("the host read device memory outside a kernel or a copy") != std::string::npos);
  CHECK(c.err.find("cuda:0") != std::string::npos);
  CHECK(c.err.find("caching-allocator block") != std::string::npos);
  CHECK(c.err.find("planted_host_read") != std::string::npos);
}

TEST_CASE("planted (a): a host write of device memory faults and names the place") {
  Tensor t = filled(3.0f);
  const Child c = in_child([&] { planted_host_write(t); });
  INFO(c.err);
  CHECK(c.signal == SIGSEGV);
  CHECK(c.err.find("the host wrote device memory") != std::string::npos);
  CHECK(c.err.find("planted_host_write") != std::string::npos);
}

TEST_CASE("planted (b): a kernel reads what another stream wrote without an event wait") {
  cuda::CudaStream s1, s2;
  Tensor x = filled(1.0f);
  cuda::synchronize();
  {
    cuda::StreamGuard g(s1);
    x.copy_(ops::mul(x, 2.0));  // writes x on s1
  }
  cuda::StreamGuard g(s2);
  const uint64_t races = cuda::emu_device::sanitizer_stats().races;
  try {
    Tensor y = ops::add(x, x);  // reads x on s2: nothing orders it after the write on s1
    FAIL("the race went unreported");
  } catch (const Error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("stream sanitizer") != std::string::npos);
    CHECK(m.find("stream " + std::to_string(0)) == std::string::npos);  // names streams, not "stream 0"
    CHECK(m.find("reads") != std::string::npos);
    CHECK(m.find("last wrote") != std::string::npos);
    CHECK(m.find("kernel '") != std::string::npos);
  }
  CHECK(cuda::emu_device::sanitizer_stats().races == races + 1);
  cuda::synchronize();  // before x is freed: it was last written on s1
}

TEST_CASE("the correct version: an event recorded after the write and waited on orders it") {
  cuda::CudaStream s1, s2;
  Tensor x = filled(1.0f);
  cuda::synchronize();
  cuda::CudaEvent done(false);
  {
    cuda::StreamGuard g(s1);
    x.copy_(ops::mul(x, 2.0));
    done.record();
  }
  cuda::StreamGuard g(s2);
  done.wait();
  Tensor y = ops::add(x, x);
  CHECK(y.to(Device()).to_vector()[0] == 4.0);
  cuda::synchronize();
}

TEST_CASE("planted (b): a block freed and reused while another stream may still use it") {
  cuda::CudaStream s1;
  const uint64_t races = cuda::emu_device::sanitizer_stats().races;
  std::string message;
  {
    Tensor x = filled(1.0f, 1 << 12);  // on the default stream
    cuda::CudaEvent ready(false);
    ready.record();
    {
      cuda::StreamGuard g(s1);
      ready.wait();
      x.copy_(ops::mul(x, 2.0));  // used on s1, but never record_stream'ed there
    }
  }  // freed: the allocator may hand the block out again on the default stream at once
  try {
    Tensor y = filled(5.0f, 1 << 12);
    message = "(no error)";
  } catch (const Error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("freed and reused while another stream may still use it") != std::string::npos);
  CHECK(cuda::emu_device::sanitizer_stats().races == races + 1);
  cuda::synchronize();
}

TEST_CASE("the correct version: record_stream holds the block until that stream's work is done") {
  cuda::CudaStream s1;
  {
    Tensor x = filled(1.0f, 1 << 12);
    cuda::CudaEvent ready(false);
    ready.record();
    cuda::StreamGuard g(s1);
    ready.wait();
    x.copy_(ops::mul(x, 2.0));
    cuda::record_stream(x, s1.stream());
  }
  Tensor y = filled(5.0f, 1 << 12);
  CHECK(y.to(Device()).to_vector()[7] == 5.0);
}

TEST_CASE("a kernel given a host pointer or freed device memory fails, naming the kernel") {
  std::vector<float> host(64, 1.0f);
  CHECK_THROWS_WITH(KILN_LAUNCH(planted_scale, dim3(1), dim3(64), 0, cuda::current_stream(), host.data(), 64),
                    doctest::Contains("is a host address"));
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, 1024) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
  CHECK_THROWS_WITH(
      KILN_LAUNCH(planted_scale, dim3(1), dim3(64), 0, cuda::current_stream(), static_cast<float*>(p), 64),
      doctest::Contains("in no allocation"));
}

TEST_CASE("planted (c): launch configurations past the device's limits fail as on the device") {
  Tensor x = filled(1.0f, 2048);
  float* p = static_cast<float*>(x.data_ptr());
  CHECK_THROWS_WITH(KILN_LAUNCH(planted_scale, dim3(1), dim3(2048), 0, cuda::current_stream(), p, 2048),
                    doctest::Contains("exceeds the launch bounds"));
  CHECK_THROWS_WITH(KILN_LAUNCH(planted_scale, dim3(1), dim3(32, 32, 2), 0, cuda::current_stream(), p, 2048),
                    doctest::Contains("exceeds the launch bounds"));
  CHECK_THROWS_WITH(KILN_LAUNCH(planted_shared, dim3(1), dim3(32), 64 * 1024, cuda::current_stream(), p),
                    doctest::Contains("bytes of dynamic shared memory exceed the 49152 allowed"));
  KILN_LAUNCH(planted_scale, dim3(2), dim3(1024), 0, cuda::current_stream(), p, 2048);
  CHECK(x.to(Device()).to_vector()[2047] == 2.0);
}

TEST_CASE("planted (c): sm_90 lets a kernel opt in to 200 KiB of shared memory") {
  REQUIRE(cuda::emu_device::arch().major == 9);  // the default architecture (KILN_EMU_ARCH unset)
  cuda::set_max_dynamic_shared(planted_shared, 200 * 1024);
  Tensor x = filled(0.0f, 32);
  KILN_LAUNCH(planted_shared, dim3(1), dim3(32), 200 * 1024, cuda::current_stream(), static_cast<float*>(x.data_ptr()));
  CHECK(x.to(Device()).to_vector()[31] == 31.0);
}

TEST_CASE("planted (c): sm_70 refuses an opt-in past 96 KiB, as a V100 does") {
  REQUIRE(cuda::emu_device::arch().major == 7);  // run with KILN_EMU_ARCH=sm_70
  CHECK(cuda::device_properties(0).major == 7);
  CHECK_THROWS_WITH(cuda::set_max_dynamic_shared(planted_shared, 100 * 1024),
                    doctest::Contains("cudaFuncSetAttribute"));
  cuda::set_max_dynamic_shared(planted_shared, 96 * 1024);
  Tensor x = filled(0.0f, 32);
  KILN_LAUNCH(planted_shared, dim3(1), dim3(32), 96 * 1024, cuda::current_stream(), static_cast<float*>(x.data_ptr()));
  CHECK(x.to(Device()).to_vector()[5] == 5.0);
}

TEST_CASE("planted (b): a GEMM reading another stream's write is caught (its pointers travel in a struct)") {
  cuda::CudaStream s1, s2;
  Tensor a = full({64, 64}, 1.0, TensorOptions(DType::float32).with_device(kCuda0));
  Tensor b = full({64, 64}, 1.0, TensorOptions(DType::float32).with_device(kCuda0));
  cuda::synchronize();
  {
    cuda::StreamGuard g(s1);
    a.copy_(ops::mul(a, 3.0));  // writes a on s1
  }
  cuda::StreamGuard g(s2);
  CHECK_THROWS_WITH(ops::matmul(a, b), doctest::Contains("stream sanitizer"));
  cuda::synchronize();
}
