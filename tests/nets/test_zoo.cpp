// The model zoo: every net builds with its published parameter count, a forward pass gives the
// right output shape, and a few SGD steps on a fixed tiny batch lower the loss.
//   ctest --test-dir build -R nets.test_zoo
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "nets/zoo.h"

using namespace kiln;

TEST_CASE("mnist-cnn: parameter count, output shape, training lowers the loss") {
  manual_seed(0);
  ModulePtr net = nets::build("mnist-cnn");
  CHECK(net->num_parameters() == 1199882);
  Generator g(5);
  Tensor x = randn({4, 1, 28, 28}, {}, &g);
  Tensor y = (*net)(x);
  CHECK(y.sizes() == Shape{4, 10});
  Tensor target = from_vector(std::vector<double>{3, 1, 4, 1}, {4}, DType::int64);
  net->eval();  // no dropout: the loss must fall monotonically on a fixed batch
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    Tensor loss = ops::cross_entropy((*net)(x), target);
    if (step == 0) first = loss.item();
    last = loss.item();
    net->zero_grad();
    loss.backward();
    NoGradGuard ng;
    for (Tensor& p : net->parameters()) {
      Tensor upd = p.grad() * 0.05;
      p.copy_(p - upd);
    }
  }
  CHECK(last < first * 0.7);
}

TEST_CASE("unknown model names list the known ones") {
  CHECK_THROWS_KILN(nets::build("resnet9000"), "unknown model 'resnet9000' (known: mnist-cnn");
}
