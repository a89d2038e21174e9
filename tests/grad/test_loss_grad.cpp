// Losses: native float32 against ref float64 (outputs and gradients) and finite-difference
// gradients in double, for every reduction, label smoothing, ignore_index, segmentation-shaped
// (4-d) input, non-contiguous logits, BCE with pos_weight, MSE.
//   ctest --test-dir build -R grad.test_loss_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

namespace {

// Class indices for `shape` in [0, C), with every `ignore_every`-th set to ignore.
Tensor targets(const Shape& shape, int64_t C, int ignore_every, int64_t ignore) {
  std::vector<double> v;
  for (int64_t i = 0; i < shape_numel(shape); ++i)
    v.push_back(ignore_every > 0 && i % ignore_every == 1 ? double(ignore) : double((i * 7 + 3) % C));
  return from_vector(v, shape, TensorOptions(DType::int64));
}

const Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};
}  // namespace

TEST_CASE("cross_entropy: native vs ref, and gradients") {
  struct Case { Shape x; double smoothing; int ignore_every; int64_t ignore_index; };
  std::vector<Case> cases = {
      {{5, 4}, 0.0, 0, -100},    {{5, 4}, 0.2, 0, -100},     {{6, 3}, 0.1, 3, -100},
      {{6, 3}, 0.0, 4, 2},       {{2, 3, 4, 5}, 0.0, 5, -100}, {{2, 3, 4, 5}, 0.3, 0, -100},
      {{1, 4, 3}, 0.1, 0, -100}, {{4}, 0.1, 0, -100},
  };
  for (auto& c : cases) {
    for (Reduction r : kReductions) {
      CAPTURE(shape_str(c.x));
      CAPTURE(c.smoothing);
      CAPTURE(c.ignore_every);
      CAPTURE(reduction_name(r));
      Shape ts = c.x.size() == 1 ? Shape{} : c.x;
      if (c.x.size() > 1) ts.erase(ts.begin() + 1);
      Tensor t = targets(ts, c.x.size() == 1 ? c.x[0] : c.x[1], c.ignore_every, c.ignore_index);
      Tensor x = req(make_input(c.x, 21, DType::float64, -3, 3));
      auto fn = [t, c, r](const std::vector<Tensor>& in) {
        return ops::cross_entropy(in[0], t, r, c.smoothing, c.ignore_index);
      };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
      if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    }
  }
  // Larger: ImageNet-width rows, and segmentation maps wider than one 256-position block.
  for (Shape s : {Shape{64, 1000}, Shape{2, 5, 300}}) {
    CAPTURE(shape_str(s));
    Shape ts = s;
    ts.erase(ts.begin() + 1);
    Tensor t = targets(ts, s[1], 9, -100);
    Tensor x = req(make_input(s, 22, DType::float64, -5, 5));
    for (Reduction r : kReductions) {
      auto fn = [t, r](const std::vector<Tensor>& in) { return ops::cross_entropy(in[0], t, r, 0.1); };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    }
  }
}

TEST_CASE("nll_loss: native vs ref, gradients, and cross_entropy == nll_loss(log_softmax)") {
  for (Shape s : {Shape{5, 4}, Shape{2, 3, 4, 5}}) {
    for (Reduction r : kReductions) {
      CAPTURE(shape_str(s));
      CAPTURE(reduction_name(r));
      Shape ts = s;
      ts.erase(ts.begin() + 1);
      Tensor t = targets(ts, s[1], 4, -100);
      Tensor x = req(make_input(s, 23, DType::float64, -3, 3));
      auto nll = [t, r](const std::vector<Tensor>& in) { return ops::nll_loss(in[0], t, r); };
      CHECK_AGAINST_REF(nll, (std::vector<Tensor>{x}));
      CHECK_GRAD(nll, (std::vector<Tensor>{x}));
      // The fused kernel against the composition, values and gradients.
      Tensor x1 = req(x.detach().clone()), x2 = req(x.detach().clone());
      Tensor a = ops::cross_entropy(x1, t, r), b = ops::nll_loss(ops::log_softmax(x2, 1), t, r);
      CHECK_CLOSE(a, b, 1e-12, 1e-12);
      ops::sum(a).backward();
      ops::sum(b).backward();
      CHECK_CLOSE(x1.grad(), x2.grad(), 1e-12, 1e-12);
    }
  }
}

TEST_CASE("binary_cross_entropy_with_logits: native vs ref, gradients w.r.t. input and target") {
  for (Shape s : {Shape{7}, Shape{4, 5}, Shape{2, 3, 4}}) {
    for (bool with_pw : {false, true}) {
      for (Reduction r : kReductions) {
        CAPTURE(shape_str(s));
        CAPTURE(with_pw);
        CAPTURE(reduction_name(r));
        Tensor x = req(make_input(s, 24, DType::float64, -4, 4));
        Tensor t = req(make_input(s, 25, DType::float64, 0, 1));
        Tensor pw = with_pw ? make_input({s.back()}, 26, DType::float64, 0.5, 3) : Tensor();
        auto fn = [r](const std::vector<Tensor>& in) {
          return ops::binary_cross_entropy_with_logits(in[0], in[1], r, in[2]);
        };
        std::vector<Tensor> ins{x, t, pw};
        CHECK_AGAINST_REF(fn, ins);
        CHECK_GRAD(fn, ins);
        if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach())), t, pw}));
      }
    }
  }
  Tensor x = req(make_input({300, 70}, 27, DType::float64, -8, 8)), t = make_input({300, 70}, 28, DType::float64, 0, 1);
  auto fn = [](const std::vector<Tensor>& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1]); };
  CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x, t}));
}

TEST_CASE("mse_loss: native vs ref, gradients w.r.t. input and target") {
  for (Shape s : {Shape{7}, Shape{4, 5}, Shape{2, 3, 4}, Shape{100, 123}}) {
    for (Reduction r : kReductions) {
      CAPTURE(shape_str(s));
      CAPTURE(reduction_name(r));
      Tensor x = req(make_input(s, 29)), t = req(make_input(s, 30));
      auto fn = [r](const std::vector<Tensor>& in) { return ops::mse_loss(in[0], in[1], r); };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x, t}));
      if (x.numel() < 100) CHECK_GRAD(fn, (std::vector<Tensor>{x, t}));
      if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach())), t}));
    }
  }
}
