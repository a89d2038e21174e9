// Layers of the norm and loss families: BatchNorm1d/2d (names, shapes, running stats,
// num_batches_tracked, train/eval, state dict round trip), Dropout, Softmax, LogSoftmax, and the
// loss objects (same results as the ops).
//   ctest --test-dir build -R layers.test_norm_layers
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "layers/loss.h"
#include "layers/norm.h"

using namespace kiln;
using kiln::test::make_input;

namespace {
std::vector<std::string> names(const NamedTensors& nt) {
  std::vector<std::string> out;
  for (auto& [n, t] : nt) out.push_back(n);
  return out;
}
}  // namespace

TEST_CASE("BatchNorm2d: parameters, buffers and PyTorch names") {
  BatchNorm2d bn(3);
  CHECK(names(bn.state_dict()) ==
        std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(names(bn.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  auto sd = bn.state_dict();
  CHECK(sd[0].second.to_vector() == std::vector<double>{1, 1, 1});
  CHECK(sd[1].second.to_vector() == std::vector<double>{0, 0, 0});
  CHECK(sd[2].second.to_vector() == std::vector<double>{0, 0, 0});
  CHECK(sd[3].second.to_vector() == std::vector<double>{1, 1, 1});
  CHECK(sd[4].second.dtype() == DType::int64);
  CHECK(sd[4].second.dim() == 0);
  CHECK(sd[0].second.requires_grad());
  CHECK(bn.repr() == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");

  BatchNorm2d plain(4, 1e-3, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  CHECK(plain.state_dict().empty());
}

TEST_CASE("BatchNorm2d: training updates running stats, eval uses them") {
  BatchNorm2d bn(3);
  Tensor x = make_input({2, 3, 4, 4}, 1, DType::float32, -1, 3);
  Tensor y = bn(x);
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor expect = ops::batch_norm(x, ones({3}), zeros({3}), rm, rv, true, 0.1, 1e-5);
  CHECK_CLOSE(y, expect, 1e-6, 1e-6);
  auto sd = bn.state_dict();
  CHECK_CLOSE(sd[2].second, rm, 1e-6, 1e-7);
  CHECK_CLOSE(sd[3].second, rv, 1e-6, 1e-7);
  CHECK(sd[4].second.item() == 1);
  bn(x);
  CHECK(bn.state_dict()[4].second.item() == 2);

  // Eval: running stats normalise, no update, no counter change.
  bn.eval();
  Tensor rm2 = bn.state_dict()[2].second.clone(), rv2 = bn.state_dict()[3].second.clone();
  Tensor ye = bn(x);
  CHECK_CLOSE(ye, ops::batch_norm(x, ones({3}), zeros({3}), rm2, rv2, false), 1e-6, 1e-6);
  CHECK(bn.state_dict()[4].second.item() == 2);
  CHECK_CLOSE(bn.state_dict()[2].second, rm2, 0, 0);

  // Gradients reach weight and bias.
  bn.train();
  Tensor l = ops::sum(ops::mul(bn(x), make_input({2, 3, 4, 4}, 2, DType::float32)));
  l.backward();
  CHECK(bn.named_parameters()[0].second.grad().defined());
  CHECK(bn.named_parameters()[1].second.grad().defined());
}

TEST_CASE("BatchNorm momentum=None is a cumulative average; no tracking uses batch stats in eval") {
  BatchNorm1d bn(2, 1e-5, std::nullopt);
  Tensor a = from_vector(std::vector<double>{0, 10, 2, 30}, {2, 2}), b = from_vector(std::vector<double>{4, 1, 6, 3}, {2, 2});
  bn(a);
  bn(b);
  // Means: batch a [1, 20], batch b [5, 2]; cumulative average [3, 11].
  CHECK_CLOSE(bn.state_dict()[2].second, from_vector(std::vector<double>{3, 11}, {2}), 1e-6, 1e-6);
  // Unbiased variances: a [2, 200], b [2, 2]; average from 1: step 1 momentum 1 -> [2, 200], then [2, 101].
  CHECK_CLOSE(bn.state_dict()[3].second, from_vector(std::vector<double>{2, 101}, {2}), 1e-5, 1e-5);

  BatchNorm1d untracked(2, 1e-5, 0.1, true, false);
  untracked.eval();
  Tensor y = untracked(a);  // batch statistics even in eval
  CHECK_CLOSE(y, ops::batch_norm(a, ones({2}), zeros({2}), Tensor(), Tensor(), true), 1e-6, 1e-6);
}

TEST_CASE("BatchNorm1d accepts [N, C] and [N, C, L]; wrong inputs name the layer") {
  BatchNorm1d bn(3);
  CHECK(bn(make_input({4, 3}, 3, DType::float32)).sizes() == Shape{4, 3});
  CHECK(bn(make_input({2, 3, 5}, 4, DType::float32)).sizes() == Shape{2, 3, 5});
  CHECK_THROWS_KILN(bn(zeros({2, 3, 4, 4})), "BatchNorm1d: expected 2-d or 3-d input, got [2, 3, 4, 4]");
  BatchNorm2d bn2(3);
  CHECK_THROWS_KILN(bn2(zeros({2, 3})), "BatchNorm2d: expected 4-d input, got [2, 3]");
  CHECK_THROWS_KILN(bn2(zeros({2, 5, 4, 4})), "BatchNorm2d(3): input [2, 5, 4, 4] has 5 channels, expected 3");
}

TEST_CASE("BatchNorm2d state dict round trip") {
  BatchNorm2d a(3), b(3);
  a(make_input({2, 3, 3, 3}, 5, DType::float32));
  b.load_state_dict(a.state_dict());
  auto sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    CAPTURE(sa[i].first);
    CHECK(sa[i].second.to_vector() == sb[i].second.to_vector());
  }
  a.eval();
  b.eval();
  Tensor x = make_input({1, 3, 2, 2}, 6, DType::float32);
  CHECK_CLOSE(a(x), b(x), 0, 0);
}

TEST_CASE("Dropout, Softmax, LogSoftmax layers") {
  Generator gen(3);
  Dropout d(0.25, &gen);
  CHECK(d.repr() == "Dropout(p=0.25)");
  Tensor x = ones({4000});
  Tensor y = d(x);
  double kept = ops::sum(ops::gt(y, zeros({}))).item() / 4000.0;
  CHECK(kept == doctest::Approx(0.75).epsilon(0.05));
  CHECK(ops::amax(y).item() == doctest::Approx(1.0 / 0.75));
  d.eval();
  CHECK(d(x).is_same(x));
  CHECK_THROWS_KILN(Dropout(2.0), "Dropout: probability has to be between 0 and 1, but got 2");

  Tensor z = make_input({3, 5}, 7);
  CHECK_CLOSE(Softmax(1)(z), ops::softmax(z, 1), 0, 0);
  CHECK_CLOSE(LogSoftmax(0)(z), ops::log_softmax(z, 0), 0, 0);
  CHECK(Softmax(-1).repr() == "Softmax(dim=-1)");
}

TEST_CASE("loss objects give the ops' results") {
  Tensor x = make_input({4, 3}, 8);
  Tensor t = from_vector(std::vector<double>{0, 2, -100, 1}, {4}, TensorOptions(DType::int64));
  CrossEntropyLoss ce(Reduction::sum, 0.1);
  CHECK(ce(x, t).item() == doctest::Approx(ops::cross_entropy(x, t, Reduction::sum, 0.1).item()));
  CHECK(ce.repr() == "CrossEntropyLoss(reduction=sum, label_smoothing=0.1, ignore_index=-100)");
  CHECK(NLLLoss()(ops::log_softmax(x, 1), t).item() == doctest::Approx(CrossEntropyLoss()(x, t).item()));
  Tensor p = make_input({4, 3}, 9, DType::float64, 0, 1), pw = make_input({3}, 10, DType::float64, 1, 2);
  CHECK(BCEWithLogitsLoss(Reduction::mean, pw)(x, p).item() ==
        doctest::Approx(ops::binary_cross_entropy_with_logits(x, p, Reduction::mean, pw).item()));
  CHECK(MSELoss(Reduction::none)(x, p).sizes() == Shape{4, 3});
  CHECK(MSELoss()(x, p).item() == doctest::Approx(ops::mse_loss(x, p).item()));
  CHECK_THROWS_KILN(CrossEntropyLoss(Reduction::mean, 1.5), "CrossEntropyLoss: label_smoothing must be in [0, 1]");
}
