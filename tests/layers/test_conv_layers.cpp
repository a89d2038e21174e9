// Conv2d and ConvTranspose2d layers: they compute the op with their parameters, have PyTorch's
// parameter names, shapes and init bounds, round-trip a state dict, and reject bad arguments.
//   ctest --test-dir build -R layers.test_conv_layers
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "layers/conv.h"

using namespace kiln;

namespace {

double max_abs(const Tensor& t) { return ops::amax(ops::abs(t)).item(); }

}  // namespace

TEST_CASE("Conv2d: parameters, init, forward and backward") {
  manual_seed(1);
  auto conv = make<Conv2d>(4, 6, ConvHW(3, 2), 2, ConvHW(1, 0), 1, 2);
  auto params = conv->named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  CHECK(conv->weight().sizes() == Shape{6, 2, 3, 2});
  CHECK(conv->bias().sizes() == Shape{6});
  CHECK(conv->weight().requires_grad());
  // PyTorch's default init: U(-b, b) with b = 1/sqrt(fan_in), fan_in = 2 * 3 * 2 for both.
  const double bound = 1.0 / std::sqrt(12.0);
  CHECK(max_abs(conv->weight()) <= bound);
  CHECK(max_abs(conv->weight()) > 0.8 * bound);  // 72 draws: the largest is near the bound
  CHECK(max_abs(conv->bias()) <= bound);
  CHECK(conv->repr() == "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 0), groups=2)");

  Tensor x = test::make_input({2, 4, 7, 6}, 3, DType::float32);
  Tensor y = (*conv)(x);
  CHECK(y.sizes() == Shape{2, 6, 4, 3});
  CHECK_CLOSE(y, ops::conv2d(x, conv->weight(), conv->bias(), 2, ConvHW(1, 0), 1, 2), 0, 0);
  ops::sum(y).backward();
  CHECK(conv->weight().grad().sizes() == Shape{6, 2, 3, 2});
  // d sum(y) / d bias[k] = the number of output positions.
  CHECK(conv->bias().grad().to_vector() == std::vector<double>(6, 2.0 * 4 * 3));

  auto nobias = make<Conv2d>(3, 8, 1, 1, 0, 1, 1, false);
  CHECK(nobias->named_parameters().size() == 1);
  CHECK_FALSE(nobias->bias().defined());
  CHECK(nobias->repr() == "Conv2d(3, 8, kernel_size=(1, 1), stride=(1, 1), bias=False)");
  auto dil = make<Conv2d>(2, 2, 3, 1, 2, 2);
  CHECK(dil->repr() == "Conv2d(2, 2, kernel_size=(3, 3), stride=(1, 1), padding=(2, 2), dilation=(2, 2))");
  CHECK((*dil)(zeros({1, 2, 5, 5})).sizes() == Shape{1, 2, 5, 5});
}

TEST_CASE("Conv2d: state dict round trip and the module's dtype") {
  manual_seed(2);
  auto a = make<Conv2d>(3, 5, 3, 1, 1);
  auto b = make<Conv2d>(3, 5, 3, 1, 1);
  Tensor x = test::make_input({1, 3, 6, 6}, 4, DType::float32);
  CHECK(test::compare((*a)(x), (*b)(x), 0, 0) != "");  // different random init
  b->load_state_dict(a->state_dict());
  CHECK_CLOSE((*b)(x), (*a)(x), 0, 0);
  auto c = make<Conv2d>(3, 4, 3);
  CHECK_THROWS_KILN(c->load_state_dict(a->state_dict()), "    weight: [5, 3, 3, 3] in the state dict, [4, 3, 3, 3] in the module");
  // After to(float64) the layer runs in double (on ref) and agrees with float32.
  a->to(DType::float64);
  CHECK(a->weight().dtype() == DType::float64);
  Tensor y64 = (*a)(x.to(DType::float64));
  CHECK_CLOSE(y64.to(DType::float32), (*b)(x), 1e-5, 1e-5);
}

TEST_CASE("ConvTranspose2d: parameters, init and forward") {
  manual_seed(3);
  auto up = make<ConvTranspose2d>(4, 6, 3, 2, 1, 1, 2);
  CHECK(up->weight().sizes() == Shape{4, 3, 3, 3});  // [in, out/groups, kh, kw]
  CHECK(up->bias().sizes() == Shape{6});
  const double bound = 1.0 / std::sqrt(3.0 * 9);  // fan_in = weight.size(1) * kernel area, as PyTorch
  CHECK(max_abs(up->weight()) <= bound);
  CHECK(max_abs(up->weight()) > 0.8 * bound);
  CHECK(max_abs(up->bias()) <= bound);
  CHECK(up->repr() ==
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2, output_padding=(1, 1))");
  Tensor x = test::make_input({2, 4, 5, 4}, 5, DType::float32);
  Tensor y = (*up)(x);
  CHECK(y.sizes() == Shape{2, 6, 10, 8});
  CHECK_CLOSE(y, ops::conv_transpose2d(x, up->weight(), up->bias(), 2, 1, 1, 1, 2), 0, 0);

  auto plain = make<ConvTranspose2d>(2, 3, ConvHW(2, 3), 1, 0, 0, 1, false, 2);
  CHECK(plain->named_parameters().size() == 1);
  CHECK(plain->repr() == "ConvTranspose2d(2, 3, kernel_size=(2, 3), stride=(1, 1), dilation=(2, 2), bias=False)");
  CHECK((*plain)(zeros({1, 2, 4, 4})).sizes() == Shape{1, 3, 6, 8});
  auto p2 = make<ConvTranspose2d>(2, 3, ConvHW(2, 3), 1, 0, 0, 1, false, 2);
  p2->load_state_dict(plain->state_dict());
  Tensor z = test::make_input({1, 2, 4, 4}, 6, DType::float32);
  CHECK_CLOSE((*p2)(z), (*plain)(z), 0, 0);
}

TEST_CASE("conv layers: bad arguments") {
  CHECK_THROWS_KILN(Conv2d(3, 4, 3, 1, 0, 1, 2), "Conv2d: in_channels 3 not divisible by groups 2");
  CHECK_THROWS_KILN(Conv2d(4, 3, 3, 1, 0, 1, 2), "Conv2d: out_channels 3 not divisible by groups 2");
  CHECK_THROWS_KILN(Conv2d(0, 3, 3), "Conv2d: channels must be positive");
  CHECK_THROWS_KILN(Conv2d(3, 3, ConvHW(0, 3)), "Conv2d: kernel_size (0, 3) must be positive");
  CHECK_THROWS_KILN(ConvTranspose2d(4, 3, 3, 1, 0, 0, 2), "ConvTranspose2d: out_channels 3 not divisible by groups 2");
  auto conv = make<Conv2d>(3, 4, 3);
  CHECK_THROWS_KILN((*conv)(zeros({1, 2, 8, 8})), "conv2d: input [1, 2, 8, 8] has 2 channels but weight [4, 3, 3, 3]");
}
