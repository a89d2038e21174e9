// The README's "a net in plain C++" example, kept compiling and checked for values.
//   ctest --test-dir build -R layers.test_readme_example
#include "tests/support/testing.h"

#include <cmath>

#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool.h"

TEST_CASE("README example: a small CNN, a loss, gradients for every parameter") {
  kiln::manual_seed(3);
  kiln::Tensor images = kiln::randn({2, 1, 28, 28});
  kiln::Tensor labels = kiln::from_vector(std::vector<double>{7, 2}, {2}, kiln::DType::int64);

  auto net = kiln::make<kiln::Sequential>();
  net->add(kiln::make<kiln::Conv2d>(1, 32, 3)).add(kiln::make<kiln::ReLU>())
      .add(kiln::make<kiln::MaxPool2d>(2)).add(kiln::make<kiln::Flatten>())
      .add(kiln::make<kiln::Linear>(32 * 13 * 13, 10));
  kiln::CrossEntropyLoss criterion;
  kiln::Tensor loss = criterion((*net)(images), labels);
  loss.backward();

  // Freshly initialised 10-way classifier: the loss is near log(10).
  CHECK(loss.item() == doctest::Approx(std::log(10.0)).epsilon(0.3));
  for (auto& [name, p] : net->named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().sizes() == p.sizes());
  }
}
