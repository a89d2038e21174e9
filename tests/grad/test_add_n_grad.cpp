// ops::add_n (the n-ary "sum" op): finite-difference gradients in float64 on the ref and native
// kernels, one to five inputs, an input passed twice (its gradient accumulates).
//   ctest --test-dir build -R grad.test_add_n_grad
#include "tests/support/testing.h"

#include "engine/dispatch.h"
#include "engine/ops/shape.h"

using namespace kiln;

TEST_CASE("add_n: gradcheck") {
  const test::Fn f = [](const std::vector<Tensor>& in) { return ops::add_n(in); };
  for (const char* b : {"ref", "native"}) {
    CAPTURE(b);
    BackendGuard g(b, true);
    std::vector<Tensor> xs;
    for (int i = 0; i < 5; ++i) {
      xs.push_back(test::make_input({2, 3, 4}, 60 + uint64_t(i)).requires_grad_(true));
      CHECK_GRAD(f, xs);
    }
    const test::Fn twice = [](const std::vector<Tensor>& in) { return ops::add_n({in[0], in[1], in[0]}); };
    CHECK_GRAD(twice, (std::vector<Tensor>{xs[0], xs[1]}));
  }
}
