// The CUDA device runtime where there may be no GPU (CI): device count 0 is no error, CUDA
// requests fail with clear messages, KILN_CUDA_CHECK's text, versions, device choice by local
// rank, and the device checks of ops (on tensors that only claim to be on cuda:0, so no kernel
// runs). The same checks on a real device are in tests/gpu.
//   ctest --test-dir build -R engine.test_cuda_runtime
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "tests/support/testing.h"

using namespace kiln;

namespace {

// A tensor that says it lives on cuda:0 but whose storage is the host memory of `host` (kept alive
// by the capture): enough for checks that run before any kernel.
Tensor claims_cuda(const Tensor& host) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(host.data_ptr(), host.impl()->storage->nbytes,
                                                Device(DeviceType::cuda, 0), [keep = host](void*, size_t) {});
  impl->sizes = host.sizes();
  impl->strides = host.strides();
  impl->dtype = host.dtype();
  return Tensor(impl);
}

struct EnvVar {
  std::string name;
  explicit EnvVar(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~EnvVar() { ::unsetenv(name.c_str()); }
};

}  // namespace

// The GPUs the kernel driver exposes (/dev/nvidia0, /dev/nvidia1 ...), counted without CUDA: what
// device_count() must agree with where CUDA_VISIBLE_DEVICES does not narrow it.
static int driver_device_nodes() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev")) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++n;
  }
  return n;
}

TEST_CASE("cuda runtime: availability matches the device count, never throws") {
  const int n = cuda::device_count();
  CHECK(cuda::is_available() == (n > 0));
  if (!cuda::built_with_cuda()) {
    CHECK(n == 0);
    CHECK(cuda::no_device_reason() == "kiln was built without CUDA");
  } else if (!std::getenv("CUDA_VISIBLE_DEVICES")) {
    CHECK(n == driver_device_nodes());
  }
  CHECK(cuda::no_device_reason().empty() == (n > 0));
}

TEST_CASE("cuda runtime: without a device, CUDA requests fail naming the device") {
  if (cuda::is_available()) return;  // tests/gpu covers the device
  const std::string why = cuda::built_with_cuda() ? "no CUDA device is available" : "kiln was built without CUDA";
  CHECK_THROWS_KILN(empty({2, 3}, Device("cuda:0")), why);
  CHECK_THROWS_KILN(from_vector(std::vector<double>{1, 2}, {2}).to(Device("cuda:1")), "device cuda:1: " + why);
  CHECK_THROWS_KILN(cuda::device_for_local_rank(), "device_for_local_rank");
  CHECK_THROWS_AS(cuda::CudaStream(), Error);
  CHECK_THROWS_AS(cuda::CudaEvent(), Error);
  CHECK_THROWS_AS(cuda::StreamGuard(0, nullptr), Error);
  if (!cuda::built_with_cuda()) {
    CHECK_THROWS_KILN(cuda::synchronize(), "kiln was built without CUDA");
    CHECK_THROWS_KILN(cuda::set_device(0), "kiln was built without CUDA");
  }
}

#if defined(KILN_HAVE_CUDA)
TEST_CASE("cuda runtime: KILN_CUDA_CHECK names the call, the error and file:line") {
  try {
    KILN_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("cudaErrorInvalidValue: cudaErrorInvalidValue (1): invalid argument") != std::string::npos);
    CHECK(m.find("test_cuda_runtime.cpp:") != std::string::npos);
  }
  KILN_CUDA_CHECK(cudaSuccess);
}
#endif

TEST_CASE("cuda runtime: versions") {
  CHECK(cuda::cuda_version_string(13000) == "13.0");
  CHECK(cuda::cuda_version_string(11080) == "11.8");
  CHECK(cuda::cuda_version_string(12040) == "12.4");
  CHECK(cuda::cuda_version_string(0) == "none");
  const cuda::Versions v = cuda::versions();
  CHECK((v.runtime > 0) == cuda::built_with_cuda());
#if defined(KILN_HAVE_CUBLAS)
  CHECK(v.cublas >= 110000);
#endif
#if defined(KILN_HAVE_CUDNN)
  CHECK(v.cudnn >= 8000);
#endif
#if defined(KILN_HAVE_NCCL)
  CHECK(v.nccl >= 2000);
#endif
}

TEST_CASE("cuda runtime: local rank from the launcher's environment") {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"})
    ::unsetenv(var);
  CHECK(cuda::local_rank() == -1);
  {
    EnvVar slurm("SLURM_LOCALID", "3");
    CHECK(cuda::local_rank() == 3);
    EnvVar ompi("OMPI_COMM_WORLD_LOCAL_RANK", "1");  // Open MPI's wins
    CHECK(cuda::local_rank() == 1);
  }
  {
    EnvVar pmi("PMI_LOCAL_RANK", "x2");
    CHECK_THROWS_KILN(cuda::local_rank(), "PMI_LOCAL_RANK='x2' is not a local rank");
  }
  if (cuda::is_available()) {
    EnvVar r("MPI_LOCALRANKID", "5");
    CHECK(cuda::device_for_local_rank() == 5 % cuda::device_count());
  }
}

TEST_CASE("ops refuse operands on different devices, naming both") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor b = claims_cuda(from_vector(std::vector<double>{4, 5, 6}, {3}));
  CHECK(b.device() == Device("cuda:0"));
  CHECK_THROWS_KILN(ops::add(a, b), "cuda:0");
  CHECK_THROWS_KILN(ops::mul(b, a), "device mismatch, cuda:0 vs cpu");
  CHECK_THROWS_KILN(ops::mse_loss(a, b), "mse_loss: operands on different devices, Tensor[3] float32 cpu and "
                                         "Tensor[3] float32 cuda:0");
}

TEST_CASE("every op with a CPU kernel has a native CUDA kernel too (docs/architecture.md)") {
  if (!cuda::built_with_cuda()) return;
  std::vector<std::string> missing;
  for (const OpTableBase* t : registry().ops()) {
    const std::vector<std::string> c = t->candidates();
    const bool cpu = std::find_if(c.begin(), c.end(), [](const std::string& s) { return s.find("/cpu") != std::string::npos; }) != c.end();
    const bool cuda_native = std::find(c.begin(), c.end(), "native/cuda") != c.end();
    if (cpu && !cuda_native) missing.push_back(t->name());
  }
  std::string list;
  for (const std::string& m : missing) list += m + " ";
  CHECK_MESSAGE(missing.empty(), "ops without kiln's own CUDA kernel: ", list);
}
