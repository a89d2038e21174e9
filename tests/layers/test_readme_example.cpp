// The README's "a net in plain C++" example, kept compiling and checked for values.
//   ctest --test-dir build -R layers.test_readme_example
#include "tests/support/testing.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
  kiln::Tensor logits = (*net)(images);
  kiln::Tensor loss = criterion(logits, labels);
  loss.backward();

  // The loss is the mean of logsumexp(z) - z[label] over the batch, computed here in double.
  // Freshly initialised, the logits are nearly equal, so each term is within the logits' spread
  // (max z - min z) of log(10): logsumexp(z) lies in [log 10 + min z, log 10 + max z].
  const std::vector<double> z = logits.to_vector(), y = labels.to_vector();
  double want = 0, spread = 0;
  for (int i = 0; i < 2; ++i) {
    const auto row = z.begin() + 10 * i;
    const double lo = *std::min_element(row, row + 10), hi = *std::max_element(row, row + 10);
    double sum = 0;
    for (int k = 0; k < 10; ++k) sum += std::exp(row[k] - hi);
    want += (hi + std::log(sum) - row[int(y[size_t(i)])]) / 2;
    spread = std::max(spread, hi - lo);
  }
  CHECK(kiln::test::near(loss.item(), want, 1e-6 * want));
  // Linear's default initialisation (uniform, variance 1 / (3 fan_in)) gives logits of standard
  // deviation sqrt(E[x^2] / 3), about 0.4 here: ten of them span about 1.4 (1.42 with this seed),
  // far under 3; a broken initialisation (unscaled weights) spreads them by tens.
  CHECK(spread < 3.0);
  CHECK(kiln::test::near(loss.item(), std::log(10.0), spread));
  for (const auto& entry : net->named_parameters()) {
    const std::string& name = entry.first;
    const kiln::Tensor& p = entry.second;
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().sizes() == p.sizes());
  }
}
