// The differentiable Tensor methods (engine/tensor.h): view, reshape (as a view and as a copy),
// permute, transpose, slice (with a step), narrow, select, expand, squeeze, unsqueeze, flatten,
// contiguous (plain and channels-last), clone and to(dtype): native float32 against ref float64
// (outputs and input gradients, through an elementwise op so the kernels run) and
// finite-difference gradients in float64, on contiguous and non-contiguous inputs.
//   ctest --test-dir build -R grad.test_view_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

TEST_CASE("view-like methods: native vs ref, and gradients") {
  using F = std::function<Tensor(const Tensor&)>;
  // Each result goes through a multiplication by a ramp, so every output element's gradient
  // differs and a wrong backward mapping (a transposed or shifted index) shows.
  const std::vector<std::pair<const char*, F>> fns = {
      {"view", [](auto& x) { return x.contiguous().view({4, -1}); }},
      {"reshape (view)", [](auto& x) { return x.contiguous().reshape({6, 5, 2}); }},
      {"reshape (copy)", [](auto& x) { return x.transpose(0, 2).reshape({-1}); }},
      {"permute", [](auto& x) { return x.permute({2, 0, 1}); }},
      {"transpose", [](auto& x) { return x.transpose(-1, -3); }},
      {"slice with step", [](auto& x) { return x.slice(2, 1, 5, 2); }},
      {"slice, negative dim", [](auto& x) { return x.slice(-2, 1, 3); }},
      {"narrow", [](auto& x) { return x.narrow(0, 1, 2); }},
      {"select", [](auto& x) { return x.select(1, 2); }},
      {"expand", [](auto& x) { return x.slice(1, 0, 1).expand({3, 4, 5}); }},
      {"expand, new leading dim", [](auto& x) { return x.select(0, 1).expand({2, -1, -1}); }},
      {"unsqueeze, squeeze", [](auto& x) { return x.unsqueeze(1).unsqueeze(-1).squeeze(1); }},
      {"squeeze all", [](auto& x) { return x.narrow(1, 2, 1).squeeze(); }},
      {"flatten", [](auto& x) { return x.flatten(1); }},
      {"flatten all", [](auto& x) { return x.flatten(); }},
      {"contiguous", [](auto& x) { return x.transpose(0, 1).contiguous(); }},
      {"contiguous channels-last", [](auto& x) { return x.unsqueeze(0).contiguous(MemoryFormat::channels_last); }},
      {"clone", [](auto& x) { return x.clone(); }},
  };
  for (const auto& entry : fns) {
    const char* name = entry.first;
    const auto& f = entry.second;
    for (bool nc : {false, true}) {
      CAPTURE(name);
      CAPTURE(nc);
      Tensor x0 = make_input({3, 4, 5}, 11);
      Tensor x = req(nc ? non_contiguous(x0) : x0);
      auto fn = [f = f](const std::vector<Tensor>& in) {
        Tensor y = f(in[0]);
        Tensor ramp = ops::add(arange(y.numel(), TensorOptions(y.dtype())).reshape(y.sizes()), 1.0);
        return ops::mul(y, ramp);
      };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
    }
  }
}

TEST_CASE("to(dtype): values rounded to the target dtype, gradients converted back") {
  Tensor x = req(make_input({3, 4}, 12));
  // float64 -> float32 -> float64: linear with slope 1, up to float32 rounding of the values.
  auto round_trip = [](const std::vector<Tensor>& in) {
    return ops::mul(in[0].to(DType::float32).to(DType::float64), 2.0);
  };
  test::GradcheckOptions o;
  o.eps = 1e-2;  // larger than float32's rounding of |x| <= 1 (6e-8), so the slope shows
  o.rtol = o.atol = 1e-4;
  CHECK_GRAD(round_trip, (std::vector<Tensor>{x}), o);
  Tensor x2 = req(make_input({3, 4}, 13));
  Tensor h = x2.to(DType::bfloat16);
  CHECK(h.dtype() == DType::bfloat16);
  ops::sum(ops::mul(h, 3.0)).backward();
  REQUIRE(x2.grad().defined());
  CHECK(x2.grad().dtype() == DType::float64);
  CHECK(x2.grad().to_vector() == std::vector<double>(12, 3.0));
  // The forward rounds: bfloat16 keeps 8 bits of mantissa.
  CHECK(from_vector(std::vector<double>{1 + 1.0 / 512}, {1}, DType::float64).to(DType::bfloat16).item() == 1.0);
}
