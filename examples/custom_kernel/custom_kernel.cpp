// A custom layer with its own CPU kernel, registered with kiln's dispatcher from outside the
// library, and a user candidate for an existing op (gemm) chosen by backend name.
//   cmake -S examples -B /tmp/ex -DCMAKE_PREFIX_PATH=<kiln prefix> && cmake --build /tmp/ex
//   /tmp/ex/custom_kernel/custom_kernel
//
// An op is declared once as a type (KILN_DECLARE_KERNEL_OP: its name, descriptor and kernel signature;
// kiln's own are kiln::kernel_op::* in engine/op_list.inc). The dispatcher (engine/dispatch.h) keeps one
// table of candidates {backend, device, supports(desc), priority, run(desc, args...)} per op;
// registry().add<Op>(backend, device, supports, run) appends one, and a kernel of the wrong
// signature does not compile. A new op's table is yours alone; a candidate added to a built-in op
// has the default priority, level with kiln's native kernels, which registered first and so stay
// first in `auto` order: select it by name with BackendGuard("user"), set_backend_preference("user")
// or KILN_BACKEND=user (ops it does not implement fall back to the built-in backends). Register
// before other threads run ops.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace {

using namespace kiln;

// --- 1. A new op, swish(x) = x * sigmoid(beta x), with forward and backward CPU kernels ---------
// Kernels take raw pointers and a plain descriptor with a str() for errors and traces.
struct SwishDesc {
  int64_t n = 0;
  float beta = 1;
  std::string str() const { return "swish n=" + std::to_string(n) + " beta=" + std::to_string(beta); }
};

void swish_fwd_cpu(const SwishDesc& d, const float* x, float* y) {
  for (int64_t i = 0; i < d.n; ++i) y[i] = x[i] / (1.0f + std::exp(-d.beta * x[i]));
}

// d/dx x s(bx) = s(bx) + b x s(bx) (1 - s(bx))
void swish_bwd_cpu(const SwishDesc& d, const float* x, const float* gy, float* gx) {
  for (int64_t i = 0; i < d.n; ++i) {
    const float s = 1.0f / (1.0f + std::exp(-d.beta * x[i]));
    gx[i] = gy[i] * (s + d.beta * x[i] * s * (1 - s));
  }
}

KILN_DECLARE_KERNEL_OP(swish_fwd, "user.swish_fwd", SwishDesc, const float* src, float* dst);
KILN_DECLARE_KERNEL_OP(swish_bwd, "user.swish_bwd", SwishDesc, const float* src, const float* diff_dst, float* diff_src);

void register_swish() {
  registry().add<swish_fwd>("user", DeviceType::cpu, nullptr, swish_fwd_cpu);  // null supports(): takes all
  registry().add<swish_bwd>("user", DeviceType::cpu, nullptr, swish_bwd_cpu);
}

// The op: checks, output allocation, the dispatch call and the autograd record.
Tensor swish(const Tensor& x_in, float beta) {
  KILN_CHECK(x_in.dtype() == DType::float32, "swish: float32 only, got ", dtype_name(x_in.dtype()));
  Tensor x = x_in.contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()));
  SwishDesc d{x.numel(), beta};
  dispatch<swish_fwd>(x.device().type, d, x.data<float>(), y.data<float>());
  autograd::record_fn("SwishBackward", {x_in}, {&y}, [x, d](std::vector<Tensor>& g) {
    Tensor gy = g[0].contiguous();
    Tensor gx = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()));
    dispatch<swish_bwd>(x.device().type, d, x.data<float>(), gy.data<float>(), gx.data<float>());
    return std::vector<Tensor>{gx};
  });
  return y;
}

// The layer: a Module like kiln's own, usable in a Sequential.
class Swish : public Module {
 public:
  explicit Swish(float beta = 1) : beta_(beta) {}
  Tensor forward(const Tensor& x) override { return swish(x, beta_); }
  std::string repr() const override { return "Swish(beta=" + std::to_string(beta_) + ")"; }

 private:
  float beta_;
};

// --- 2. A user candidate for the built-in gemm op (plain row-major float32, no transposes) ------
int user_gemm_calls = 0;

bool user_gemm_supports(const GemmDesc& d) {
  return d.dtype == DType::float32 && !d.trans_a && !d.trans_b && d.batch == 1;
}

void user_gemm_run(const GemmDesc& d, const void* a_, const void* b_, void* c_) {
  ++user_gemm_calls;
  auto a = static_cast<const float*>(a_);
  auto b = static_cast<const float*>(b_);
  auto c = static_cast<float*>(c_);
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < d.k; ++p) acc += double(a[i * d.lda + p]) * b[p * d.ldb + j];
      float& out = c[i * d.ldc + j];
      out = float(d.alpha * acc + (d.beta == 0 ? 0.0 : d.beta * out));
    }
}

}  // namespace

int main() {
  register_swish();
  registry().add<kernel_op::gemm>("user", DeviceType::cpu, user_gemm_supports, user_gemm_run);

  // The custom layer in a small net; gradients flow through its backward kernel.
  manual_seed(1);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Linear>(4, 8), make<Swish>(1.5f), make<Linear>(8, 3)});
  Tensor x = from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 1.0f, -0.5f, 0.25f}, {2, 4});
  Tensor y = net->forward(x);
  ops::sum(y).backward();
  std::printf("net: %s -> Swish -> %s, output [%lld, %lld], grad norm of layer 0 weight %.4f\n",
              (*net)[0]->repr().c_str(), (*net)[2]->repr().c_str(), (long long)y.size(0), (long long)y.size(1),
              std::sqrt(ops::sum(ops::square(net->named_parameters()[0].second.grad())).item()));

  // swish(x) against the formula, and its gradient against a central difference.
  Tensor t = from_vector(std::vector<float>{-2.0f, -0.5f, 0.0f, 0.75f, 3.0f}, {5});
  t.requires_grad_();
  Tensor s = swish(t, 1.5f);
  ops::sum(s).backward();
  double worst = 0;
  for (int i = 0; i < 5; ++i) {
    const double v = t.to_vector()[i], h = 1e-3;
    auto f = [](double z) { return z / (1 + std::exp(-1.5 * z)); };
    worst = std::max(worst, std::fabs(s.to_vector()[i] - f(v)));
    worst = std::max(worst, std::fabs(t.grad().to_vector()[i] - (f(v + h) - f(v - h)) / (2 * h)));
  }
  std::printf("swish: worst error against formula and finite difference %.2e\n", worst);

  // The user gemm, picked by name for this scope.
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor c;
  {
    BackendGuard guard("user");
    c = ops::matmul(a, b);
  }
  std::vector<double> cv = c.to_vector();  // [[4, 5], [10, 11]]
  std::printf("user gemm: called %d time(s), result [[%g, %g], [%g, %g]]\n", user_gemm_calls, cv[0], cv[1], cv[2],
              cv[3]);
  const bool ok = worst < 1e-3 && user_gemm_calls == 1 && cv[0] == 4 && cv[1] == 5 && cv[2] == 10 && cv[3] == 11;
  std::printf("custom_kernel: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
