// The dispatcher: explicit preference, per-scope override, the registry listing, and the error
// when nothing fits.
//   ctest --test-dir build -R engine.test_dispatch
#include "tests/support/testing.h"

#include "engine/autograd.h"
#include "engine/cuda_runtime.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "kernels/common/elementwise.h"

using namespace kiln;

TEST_CASE("every op has a native and a ref CPU implementation") {
  for (const OpTableBase* op : registry().ops()) {
    std::vector<std::string> c = op->candidates();
    bool has_ref = false, has_native = false;
    for (auto& s : c) {
      has_ref |= s == "ref/cpu";
      has_native |= s == "native/cpu";
    }
    CAPTURE(op->name());
    CHECK(has_ref);
    CHECK(has_native);
  }
  CHECK(registry().ops().size() >= 6);
}

TEST_CASE("preference picks the backend; ref and native agree") {
  Tensor x = from_vector(std::vector<double>{-1, 2}, {2});
  {
    BackendGuard g("ref", true);
    CHECK(backend_preference() == "ref (strict)");
    auto& t = op_table<op::unary>();
    UnaryDesc d;
    d.dtype = DType::float32;
    CHECK(backend_name(t.select(DeviceType::cpu, d).backend) == "ref");
    CHECK(ops::relu(x).to_vector() == std::vector<double>{0, 2});
  }
  {
    BackendGuard g("native,ref");
    auto& t = op_table<op::unary>();
    UnaryDesc d;
    d.dtype = DType::float32;
    CHECK(backend_name(t.select(DeviceType::cpu, d).backend) == "native");
  }
  set_backend_preference("ref", true);
  CHECK(backend_preference() == "ref (strict)");
  set_backend_preference("auto");
  CHECK(backend_preference() == "auto");
}

TEST_CASE("no matching kernel names the op, device, dtype and preference") {
  Tensor x = zeros({2, 3});
  {
    BackendGuard loose("cudnn");  // not strict: falls back to what the CPU has
    CHECK(ops::relu(x).sizes() == Shape{2, 3});
  }
  BackendGuard g("cudnn", /*strict=*/true);
  CHECK_THROWS_KILN(ops::relu(x), "no kernel for op 'unary' on cpu for relu float32");
  CHECK_THROWS_KILN(ops::relu(x), "backend preference 'cudnn (strict)'");
  CHECK_THROWS_KILN(ops::relu(x), "registered: ");
  CHECK_THROWS_KILN(ops::relu(x), "native/cpu");
}

// Another declaration of a built-in op's name with another kernel signature.
KILN_DECLARE_OP(unary_wrong_signature, "unary", UnaryDesc, void* dst);

TEST_CASE("a table asked for with another signature is an error") {
  CHECK_THROWS_KILN((registry().table<unary_wrong_signature>()), "different kernel signature");
}

TEST_CASE("devices parse and print") {
  CHECK(Device("cpu").is_cpu());
  CHECK(Device("cuda:1").index == 1);
  CHECK(Device("cuda").str() == "cuda:0");
  CHECK_THROWS_KILN(Device("tpu"), "invalid device 'tpu'");
  CHECK_THROWS_KILN(Device("cuda:x"), "invalid device");
  if (!cuda::is_available())  // "no CUDA device is available" or "kiln was built without CUDA"
    CHECK_THROWS_KILN(zeros({2}).to(Device("cuda:0")), "device cuda:0: ");
}

TEST_CASE("a node's backward runs under the backend override of its forward") {
  Tensor x = from_vector(std::vector<double>{-1, 2}, {2}).requires_grad_();
  Tensor s;
  {
    BackendGuard g("ref", /*strict=*/true);
    s = ops::sum(ops::relu(x));
  }
  REQUIRE(s.grad_fn()->backend != nullptr);
  CHECK(s.grad_fn()->backend->backends == std::vector<std::string>{"ref"});
  Tensor seed = ones({});
  // A process-wide preference with no CPU kernels at all: backward can only succeed if every
  // node reinstates the override it was recorded under.
  set_backend_preference("cudnn", /*strict=*/true);
  std::string error;
  try {
    s.backward(seed);
  } catch (const Error& e) {
    error = e.what();
  }
  set_backend_preference("auto");
  CHECK_MESSAGE(error.empty(), error);
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1});
}
