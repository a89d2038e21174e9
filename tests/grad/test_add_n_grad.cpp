// ops::add_n (the n-ary "sum" op): finite-difference gradients in float64 on the ref and on the
// native kernels (GradcheckOptions::backend), one to five inputs, an input passed twice (its
// gradient accumulates); native float32 against ref float64, non-contiguous inputs too.
//   ctest --test-dir build -R grad.test_add_n_grad
#include "tests/support/testing.h"

#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"

using namespace kiln;

TEST_CASE("add_n: gradcheck on ref and on native, and native float32 against ref") {
  const test::Fn f = [](const std::vector<Tensor>& in) { return ops::add_n(in); };
  const test::Fn twice = [](const std::vector<Tensor>& in) { return ops::add_n({in[0], in[1], in[0]}); };
  for (const char* b : {"ref", "native"}) {
    CAPTURE(b);
    test::GradcheckOptions o;
    o.backend = b;  // gradcheck pins f to it (strict): native's own float64 kernels run
    std::vector<Tensor> xs;
    for (int i = 0; i < 5; ++i) {
      xs.push_back(test::make_input({2, 3, 4}, 60 + uint64_t(i)).requires_grad_(true));
      CHECK_GRAD(f, xs, o);
    }
    CHECK_GRAD(twice, (std::vector<Tensor>{xs[0], xs[1]}), o);
  }
  std::vector<Tensor> xs;
  for (int i = 0; i < 3; ++i) xs.push_back(test::make_input({3, 5}, 70 + uint64_t(i)).requires_grad_(true));
  CHECK_AGAINST_REF(f, xs);
  CHECK_AGAINST_REF(twice, (std::vector<Tensor>{xs[0], xs[1]}));
  CHECK_AGAINST_REF(f, (std::vector<Tensor>{test::non_contiguous(xs[0].detach()).requires_grad_(true), xs[1]}));
}
