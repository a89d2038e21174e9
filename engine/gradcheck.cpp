#include "engine/gradcheck.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "engine/autograd.h"
#include "engine/backend_preference.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/random.h"

namespace kiln::autograd {

std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs0,
                      const GradcheckOptions& opt) {
  KILN_CHECK(opt.eps > 0, "gradcheck: eps must be positive, got ", opt.eps);
  KILN_CHECK(opt.rtol >= 0 && opt.atol >= 0, "gradcheck: rtol and atol must be at least 0");
  std::optional<BackendGuard> backend;
  if (!opt.backend.empty()) backend.emplace(opt.backend, /*strict=*/true);
  std::vector<Tensor> inputs;
  for (const Tensor& t : inputs0) {
    if (!t.defined() || !t.is_floating_point()) {
      inputs.push_back(t);
      continue;
    }
    Tensor c = t.detach().to(DType::float64).contiguous().clone();
    c.requires_grad_(t.requires_grad());
    inputs.push_back(c);
  }
  Tensor y = f(inputs);
  if (!y.defined() || !y.is_floating_point()) return "gradcheck: f must return a floating-point tensor";
  if (!y.requires_grad()) return "gradcheck: the output does not require grad (no input requires grad, or f detached it)";
  Generator gen(opt.seed);
  Tensor w = rand(y.sizes(), TensorOptions(DType::float64).with_device(y.device()), &gen) + 0.5;  // in [0.5, 1.5)
  auto weighted = [&](const Tensor& out) { return ops::sum(ops::mul(out.to(DType::float64), w)); };
  weighted(y).backward();
  std::ostringstream os;
  os.precision(10);
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    if (!analytic.defined()) analytic = zeros(x.sizes(), TensorOptions(DType::float64));
    const std::vector<double> an = analytic.to_vector();
    KILN_CHECK(x.device().is_cpu(), "gradcheck: input ", k, " is on ", x.device(),
               "; inputs are perturbed on the CPU (move them with .to(Device()))");
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      NoGradGuard ng;
      const double orig = p[i];
      p[i] = orig + opt.eps;
      x.bump_version();
      const double lp = weighted(f(inputs)).item();
      p[i] = orig - opt.eps;
      x.bump_version();
      const double lm = weighted(f(inputs)).item();
      p[i] = orig;
      x.bump_version();
      const double num = (lp - lm) / (2 * opt.eps);
      const double a = an[size_t(i)];
      if (!std::isfinite(num) || !std::isfinite(a) || std::abs(a - num) > opt.atol + opt.rtol * std::abs(num)) {
        os << "gradcheck" << (opt.backend.empty() ? "" : " (" + opt.backend + ")") << ": input " << k << " "
           << shape_str(x.sizes()) << " element " << i << ": analytic " << a << ", numeric " << num;
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace kiln::autograd
