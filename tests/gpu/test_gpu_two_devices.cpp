// Two CUDA devices: tensors copied cuda:0 -> cuda:1 -> host keep their values. Skipped (with the
// device count) on a machine of one GPU; the emulated device has two (KILN_EMU_DEVICES).
//   ctest --test-dir build -R gpu.test_gpu_two_devices
#include "engine/cuda_runtime.h"
#include "tests/support/testing.h"

using namespace kiln;

TEST_CASE("gpu: cuda:0 <-> cuda:1") {
  const int n = cuda::device_count();
  if (n < 2) {
    test::skip_not_built("a second CUDA device", "this machine has " + std::to_string(n));
    return;
  }
  std::vector<double> v(9);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) * 0.5 - 2;
  const Tensor h = from_vector(v, {3, 3}, TensorOptions(DType::float64));
  Tensor d1 = h.to(Device("cuda:0")).to(Device("cuda:1"));
  CHECK(d1.device() == Device("cuda:1"));
  CHECK(d1.to_vector() == h.to_vector());
  Tensor back = d1.to(Device("cuda:0"));
  CHECK(back.device() == Device("cuda:0"));
  CHECK(back.to_vector() == h.to_vector());
}
