// Registering kernels from outside the library, through the public dispatch API only
// (engine/dispatch.h: KILN_DECLARE_KERNEL_OP, registry().add<Op>(...), dispatch<Op>(...)), as examples/custom_kernel does
// against an installed kiln: a new op of the user's own, and a user candidate for a built-in op
// chosen by backend name, with fallback where it declines.
//   ctest --test-dir build -R engine.test_user_register
#include "tests/support/testing.h"

#include "engine/ops/linalg.h"
#include "kernels/common/gemm.h"

using namespace kiln;

namespace {

struct ScaleDesc {
  int64_t n = 0;
  double factor = 1;
  std::string str() const { return "scale n=" + std::to_string(n); }
};

KILN_DECLARE_KERNEL_OP(user_scale, "test_user.scale", ScaleDesc, const float* src, float* dst);

void scale_cpu(const ScaleDesc& d, const float* x, float* y) {
  for (int64_t i = 0; i < d.n; ++i) y[i] = float(x[i] * d.factor);
}

int user_gemm_calls = 0;
bool user_gemm_supports(const GemmDesc& d) { return d.dtype == DType::float32 && !d.trans_a && !d.trans_b && d.batch == 1; }
void user_gemm(const GemmDesc& d, const void* a_, const void* b_, void* c_) {
  ++user_gemm_calls;
  auto a = static_cast<const float*>(a_);
  auto b = static_cast<const float*>(b_);
  auto c = static_cast<float*>(c_);
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < d.k; ++p) acc += double(a[i * d.lda + p]) * b[p * d.ldb + j];
      c[i * d.ldc + j] = float(d.alpha * acc + (d.beta == 0 ? 0.0 : d.beta * c[i * d.ldc + j]));
    }
}

auto& gemm_table() { return op_table<kernel_op::gemm>(); }

void register_once() {
  static bool done = [] {
    registry().add<user_scale>("test_user", DeviceType::cpu, nullptr, scale_cpu);
    // Default priority: level with native, which registered first, so `auto` keeps native.
    registry().add<kernel_op::gemm>("test_user", DeviceType::cpu, user_gemm_supports, user_gemm);
    return true;
  }();
  (void)done;
}

}  // namespace

TEST_CASE("a user op is registered, listed and dispatched") {
  register_once();
  auto& t = op_table<user_scale>();
  CHECK(t.candidates() == std::vector<std::string>{"test_user/cpu"});
  bool listed = false;
  for (const OpTableBase* op : registry().ops()) listed |= op->name() == "test_user.scale";
  CHECK(listed);
  std::vector<float> x{1, -2, 3}, y(3);
  dispatch<user_scale>(DeviceType::cpu, ScaleDesc{3, 2.5}, x.data(), y.data());
  CHECK(y == std::vector<float>{2.5f, -5.0f, 7.5f});
  CHECK_THROWS_KILN(dispatch<user_scale>(DeviceType::cuda, ScaleDesc{3, 2.5}, x.data(), y.data()),
                    "no kernel for op 'test_user.scale' on cuda");
}

TEST_CASE("a user candidate for gemm runs when preferred, and not in auto order") {
  register_once();
  CHECK(gemm_table().has("test_user", DeviceType::cpu));
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<float>{0.5f, -1, 2, 0, 1, 3}, {3, 2});
  const int before = user_gemm_calls;
  Tensor want = ops::matmul(a, b);  // auto: a built-in candidate
  CHECK(user_gemm_calls == before);
  Tensor got;
  {
    BackendGuard g("test_user", /*strict=*/true);
    got = ops::matmul(a, b);
  }
  CHECK(user_gemm_calls == before + 1);
  CHECK_CLOSE(got, want, 1e-6, 1e-6);
  // Declined (transposed operand): a non-strict preference falls back to the built-in kernels.
  BackendGuard g("test_user");
  Tensor at = from_vector(std::vector<float>{1, 4, 2, 5, 3, 6}, {3, 2}).transpose(0, 1);
  CHECK_CLOSE(ops::matmul(at, b), want, 1e-6, 1e-6);
  CHECK(user_gemm_calls == before + 1);
}
