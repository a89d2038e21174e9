// Tensors on a real CUDA device: cpu -> cuda -> cpu round trips of every dtype and of contiguous,
// channels-last, strided and empty layouts; item(); gradients through to(); copies under a
// non-default stream. Two devices: test_gpu_two_devices.cpp.
//   ctest --test-dir build -L gpu
#include <cmath>

#include "engine/autograd.h"
#include "engine/cuda_allocator.h"
#include "engine/cuda_copy.h"
#include "engine/cuda_runtime.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "kernels/common/elementwise.h"
#include "tests/support/testing.h"

using namespace kiln;

namespace {
const Device kGpu("cuda:0");

Tensor values(const Shape& shape, DType dt) {
  std::vector<double> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i * 37 % 101) - 50) * (is_floating(dt) ? 0.25 : 1.0);
  if (dt == DType::uint8)
    for (auto& x : v) x = std::fabs(x);
  return from_vector(v, shape, TensorOptions(dt));
}
}  // namespace

TEST_CASE("gpu: round trips of every dtype keep the values") {
  for (DType dt : {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64,
                   DType::uint8}) {
    CAPTURE(dt);
    Tensor h = values({3, 5, 7}, dt);
    Tensor d = h.to(kGpu);
    CHECK(d.device() == kGpu);
    CHECK(d.dtype() == dt);
    CHECK(d.sizes() == h.sizes());
    Tensor back = d.to(Device());
    CHECK(back.device().is_cpu());
    CHECK(back.to_vector() == h.to_vector());
    CHECK(d.to_vector() == h.to_vector());  // host reads copy back
  }
}

TEST_CASE("gpu: layouts: channels-last stays channels-last, strided views arrive contiguous") {
  Tensor h = values({2, 3, 4, 5}, DType::float32);
  Tensor cl = h.contiguous(MemoryFormat::channels_last);
  Tensor d = cl.to(kGpu);
  CHECK(d.strides() == cl.strides());
  CHECK(d.to(Device()).to_vector() == h.to_vector());

  Tensor t = h.transpose(1, 3);  // not dense in any format
  Tensor dt = t.to(kGpu);
  CHECK(dt.is_contiguous());
  CHECK(dt.to(Device()).to_vector() == t.to_vector());

  Tensor sl = h.slice(2, 1, 3);
  CHECK(sl.to(kGpu).to_vector() == sl.to_vector());

  Tensor e = empty({0, 4}).to(kGpu);
  CHECK(e.numel() == 0);
  CHECK(e.to(Device()).sizes() == Shape{0, 4});

  Tensor s = scalar_tensor(2.5).to(kGpu);
  CHECK(s.item() == 2.5);
  CHECK(h.to(kGpu).at({1, 2, 3, 4}) == h.at({1, 2, 3, 4}));
}

TEST_CASE("gpu: dense copies on the device need no kernel; strided ones say which kernel is missing") {
  Tensor h = values({4, 6}, DType::float32);
  Tensor d = h.to(kGpu);
  Tensor c = d.clone();
  CHECK(c.to_vector() == h.to_vector());
  Tensor dst = empty({4, 6}, kGpu);
  dst.copy_(h);  // cross-device copy_ moves the source first
  CHECK(dst.to_vector() == h.to_vector());
  if (!op_table<kernel_op::copy>().has("native", DeviceType::cuda))
    CHECK_THROWS_KILN(d.t().contiguous(), "no kernel for op 'copy' on cuda");
}

TEST_CASE("gpu: gradients flow back through to(device)") {
  Tensor h = values({5}, DType::float32).requires_grad_();
  Tensor d = h.to(kGpu);
  CHECK(d.requires_grad());
  Tensor back = d.to(Device());
  ops::sum(ops::mul(back, back)).backward();
  const auto g = h.grad().to_vector();
  const auto v = h.to_vector();
  for (size_t i = 0; i < v.size(); ++i) CHECK(g[i] == doctest::Approx(2 * v[i]));
}

TEST_CASE("gpu: copies under a non-default stream") {
  cuda::CudaStream s;
  Tensor h = values({1 << 16}, DType::float32);
  Tensor d;
  {
    cuda::StreamGuard g(s);
    CHECK(cuda::current_stream() == s.stream());
    d = h.to(kGpu);
    CHECK(d.to_vector() == h.to_vector());
  }
  CHECK(cuda::current_stream() == nullptr);
  s.synchronize();
  CHECK(d.to_vector() == h.to_vector());
}

TEST_CASE("gpu: pinned tensors copy asynchronously; record_stream across streams") {
  Tensor h = values({64, 1024}, DType::float32);
  Tensor p = cuda::pin_memory(h);
  CHECK(cuda::is_pinned(p));
  CHECK_FALSE(cuda::is_pinned(h));
  CHECK(cuda::is_pinned(p.slice(0, 3, 5)));
  cuda::CudaStream side;
  Tensor d;
  {
    cuda::StreamGuard g(side);
    d = p.to(kGpu);  // the prefetch: queued on the side stream
  }
  cuda::CudaEvent copied;
  copied.record(side.stream());
  copied.wait();  // the default stream waits for the copy
  cuda::record_stream(d, nullptr);
  CHECK(d.to_vector() == h.to_vector());
}

TEST_CASE("gpu: a device that does not exist") {
  const std::string dev = "cuda:" + std::to_string(cuda::device_count());
  CHECK_THROWS_KILN(empty({2}, Device(dev)), "device " + dev + " does not exist");
}
