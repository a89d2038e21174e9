// The dispatcher: explicit preference, per-scope override, the registry listing, and the error
// when nothing fits.
//   ctest --test-dir build -R engine.test_dispatch
#include "tests/support/testing.h"

#include "engine/autograd.h"
#include "engine/backends/backends.h"
#include "engine/cuda_runtime.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "kernels/common/elementwise.h"

using namespace kiln;

namespace {

// Every op of engine/op_list.inc, by name.
const std::vector<std::string>& declared_ops() {
  static const std::vector<std::string> names = {
#define KILN_KERNEL_OP(id, ...) #id,
#include "engine/op_list.inc"
#undef KILN_KERNEL_OP
  };
  return names;
}

bool built(const char* backend, DeviceType device) {
  for (const BackendUnit& u : backend_units())
    if (std::string(u.name) == backend && u.device == device) return true;
  return false;
}

}  // namespace

TEST_CASE("every declared op has a ref and a native kernel on the CPU, and a native one on CUDA when built") {
  REQUIRE(declared_ops().size() > 40);
  const bool cuda_native = built("native", DeviceType::cuda);
  for (const std::string& name : declared_ops()) {
    CAPTURE(name);
    const OpTableBase* t = registry().find_op(name);
    REQUIRE(t != nullptr);
    CHECK(t->has("ref", DeviceType::cpu));
    CHECK(t->has("native", DeviceType::cpu));
    if (cuda_native) CHECK(t->has("native", DeviceType::cuda));
  }
}

TEST_CASE("preference picks the backend; ref and native agree") {
  Tensor x = from_vector(std::vector<double>{-1, 2}, {2});
  {
    BackendGuard g("ref", true);
    CHECK(backend_preference() == "ref (strict)");
    auto& t = op_table<kernel_op::unary>();
    UnaryDesc d;
    d.dtype = DType::float32;
    CHECK(backend_name(t.select(DeviceType::cpu, d).backend) == "ref");
    CHECK(ops::relu(x).to_vector() == std::vector<double>{0, 2});
  }
  {
    BackendGuard g("native,ref");
    auto& t = op_table<kernel_op::unary>();
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
KILN_DECLARE_KERNEL_OP(unary_wrong_signature, "unary", UnaryDesc, void* dst);

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

namespace {

// Ops of this file only, with kernels that say who ran.
KILN_DECLARE_KERNEL_OP(probe_op, "test_dispatch.probe", ConvDesc, int* ran);
KILN_DECLARE_KERNEL_OP(probe_fwd, "test_dispatch.probe_fwd", ConvDesc, int* ran);
KILN_DECLARE_KERNEL_OP(probe_bwd, "test_dispatch.probe_bwd", ConvDesc, int* ran);

void run_a(const ConvDesc&, int* ran) { *ran = 1; }
void run_b(const ConvDesc&, int* ran) { *ran = 2; }
int b_rank(const ConvDesc& d) { return d.nhwc ? priority::preferred : priority::secondary; }

// Forward fills the payload with its own marker; backward reports what it saw (0: nothing).
void fwd_a(const ConvDesc&, KernelPayload& p, int* ran) {
  p.state = std::make_shared<int>(41);
  *ran = 1;
}
void bwd_a(const ConvDesc&, KernelPayload& p, int* ran) { *ran = p.state ? *static_cast<const int*>(p.state.get()) : 0; }
void bwd_b(const ConvDesc&, KernelPayload& p, int* ran) { *ran = p.state ? -1 : 2; }

}  // namespace

TEST_CASE("the cached choice follows the preference and new registrations") {
  registry().add<probe_op>("probe_a", DeviceType::cpu, nullptr, run_a);
  ConvDesc d;
  int ran = 0;
  dispatch<probe_op>(DeviceType::cpu, d, &ran);
  CHECK(ran == 1);
  dispatch<probe_op>(DeviceType::cpu, d, &ran);  // a hit: the same choice
  CHECK(ran == 1);
  // A candidate ranked by shape: below probe_a for NCHW, above for channels-last. Registering it
  // invalidates the choices cached before.
  registry().add<probe_op>("probe_b", DeviceType::cpu, nullptr, run_b, priority::normal, b_rank);
  ConvDesc nhwc = d;
  nhwc.nhwc = true;
  dispatch<probe_op>(DeviceType::cpu, d, &ran);
  CHECK(ran == 1);
  dispatch<probe_op>(DeviceType::cpu, nhwc, &ran);
  CHECK(ran == 2);
  {
    BackendGuard g("probe_b");
    dispatch<probe_op>(DeviceType::cpu, d, &ran);
    CHECK(ran == 2);
  }
  set_backend_preference("probe_b");
  dispatch<probe_op>(DeviceType::cpu, d, &ran);
  CHECK(ran == 2);
  set_backend_preference("auto");
  dispatch<probe_op>(DeviceType::cpu, d, &ran);
  CHECK(ran == 1);
  // Descriptors that differ in one field are different keys.
  ConvDesc other = d;
  other.K = 7;
  CHECK(find_kernel<probe_op>(DeviceType::cpu, other) == find_kernel<probe_op>(DeviceType::cpu, d));
  CHECK(find_kernel<probe_op>(DeviceType::cpu, nhwc) != find_kernel<probe_op>(DeviceType::cpu, d));
}

TEST_CASE("a payload goes from forward to the backward of the same backend only") {
  registry().add<probe_fwd>("probe_a", DeviceType::cpu, nullptr, fwd_a);
  registry().add<probe_bwd>("probe_a", DeviceType::cpu, nullptr, bwd_a);
  registry().add<probe_bwd>("probe_b", DeviceType::cpu, nullptr, bwd_b, priority::fallback);
  ConvDesc d;
  KernelPayload p;
  int ran = 0;
  dispatch_with<probe_fwd>(DeviceType::cpu, d, p, &ran);
  CHECK(ran == 1);
  REQUIRE(p.state != nullptr);
  CHECK(backend_name(p.backend) == "probe_a");
  dispatch_with<probe_bwd>(DeviceType::cpu, d, p, &ran);
  CHECK(ran == 41);  // probe_a's backward saw probe_a's state
  {
    BackendGuard g("probe_b", true);
    dispatch_with<probe_bwd>(DeviceType::cpu, d, p, &ran);
    CHECK(ran == 2);  // probe_b's backward got an empty payload
  }
  CHECK(p.state != nullptr);  // and the forward's state is still there for probe_a
  dispatch<probe_bwd>(DeviceType::cpu, d, &ran);
  CHECK(ran == 0);  // without a payload: an empty one
}
