// Batch norm, dropout and softmax: native float32 against ref float64 (outputs and input
// gradients) and finite-difference gradients in double, on 2-d and 4-d inputs, batch 1,
// non-contiguous inputs, with and without affine parameters, training and eval.
//   ctest --test-dir build -R grad.test_norm_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/softmax.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

TEST_CASE("batch_norm training: native vs ref, and gradients") {
  struct Case { Shape x; bool affine; };
  // [N, C] (flat kernel path), 4-d, N = 1 with spatial size > 1, a 3-d input, no affine.
  std::vector<Case> cases = {{{5, 3}, true}, {{2, 3, 4, 5}, true}, {{1, 2, 3, 3}, true}, {{3, 4, 2}, false},
                             {{4, 2, 3, 3}, false}};
  for (auto& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.affine);
    const int64_t C = c.x[1];
    Tensor x = req(make_input(c.x, 1, DType::float64, -2, 2));
    Tensor w = c.affine ? req(make_input({C}, 2, DType::float64, 0.5, 1.5)) : Tensor();
    Tensor b = c.affine ? req(make_input({C}, 3)) : Tensor();
    Tensor rm = zeros({C}, DType::float64), rv = ones({C}, DType::float64);
    auto fn = [](const std::vector<Tensor>& in) {
      return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], true, 0.1, 1e-5);
    };
    std::vector<Tensor> ins{x, w, b, rm, rv};
    CHECK_AGAINST_REF(fn, ins);
    CHECK_GRAD(fn, ins);
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach())), w, b, rm, rv}));
  }
  // Larger: more than one 64-channel block on the flat path, and a CNN-like 4-d shape.
  for (Shape s : {Shape{37, 130}, Shape{8, 16, 7, 9}}) {
    CAPTURE(shape_str(s));
    Tensor x = req(make_input(s, 4, DType::float64, -3, 1));
    Tensor w = req(make_input({s[1]}, 5, DType::float64, 0.5, 1.5)), b = req(make_input({s[1]}, 6));
    auto fn = [](const std::vector<Tensor>& in) { return ops::batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true); };
    test::RefCompareOptions opt;
    opt.rtol = 2e-4;  // float32 sums over a few thousand values per channel
    opt.atol = 2e-5;
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x, w, b}), opt);
  }
}

TEST_CASE("batch_norm running stats: native matches ref") {
  for (Shape s : {Shape{37, 130}, Shape{4, 6, 5, 7}}) {
    CAPTURE(shape_str(s));
    Tensor x = make_input(s, 8, DType::float64, -1, 3);
    Tensor rm_r = make_input({s[1]}, 9), rv_r = make_input({s[1]}, 10, DType::float64, 0.5, 2);
    Tensor rm_n = rm_r.to(DType::float32), rv_n = rv_r.to(DType::float32);
    {
      BackendGuard g("ref");
      ops::batch_norm(x, Tensor(), Tensor(), rm_r, rv_r, true, 0.3);
    }
    {
      BackendGuard g("native");
      ops::batch_norm(x.to(DType::float32), Tensor(), Tensor(), rm_n, rv_n, true, 0.3);
    }
    CHECK_CLOSE(rm_n, rm_r, 1e-5, 1e-6);
    CHECK_CLOSE(rv_n, rv_r, 1e-5, 1e-6);
  }
}

TEST_CASE("batch_norm eval: native vs ref, and gradients") {
  for (Shape s : {Shape{5, 3}, Shape{2, 3, 4, 5}, Shape{1, 2, 3, 3}}) {
    for (bool affine : {true, false}) {
      CAPTURE(shape_str(s));
      CAPTURE(affine);
      const int64_t C = s[1];
      Tensor x = req(make_input(s, 11, DType::float64, -2, 2));
      Tensor w = affine ? req(make_input({C}, 12, DType::float64, 0.5, 1.5)) : Tensor();
      Tensor b = affine ? req(make_input({C}, 13)) : Tensor();
      Tensor rm = make_input({C}, 14), rv = make_input({C}, 15, DType::float64, 0.5, 2);
      auto fn = [](const std::vector<Tensor>& in) {
        return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5);
      };
      std::vector<Tensor> ins{x, w, b, rm, rv};
      CHECK_AGAINST_REF(fn, ins);
      CHECK_GRAD(fn, ins);
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach())), w, b, rm, rv}));
    }
  }
}

TEST_CASE("dropout: native vs ref (same mask), and gradients with a fixed generator") {
  for (Shape s : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4, 5}, Shape{1000, 33}}) {
    CAPTURE(shape_str(s));
    Tensor x = req(make_input(s, 16));
    auto fn = [](const std::vector<Tensor>& in) {
      Generator g(42);  // a fresh generator per call: the same mask every time
      return ops::dropout(in[0], 0.3, true, &g);
    };
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    if (x.numel() < 200) CHECK_GRAD(fn, (std::vector<Tensor>{x}));
    if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
  }
}

TEST_CASE("softmax and log_softmax over every dim: native vs ref, and gradients") {
  for (Shape s : {Shape{6}, Shape{3, 4, 5}, Shape{2, 3, 2, 3}}) {
    for (int64_t dim = -1; dim < int64_t(s.size()); ++dim) {
      for (bool log : {false, true}) {
        CAPTURE(shape_str(s));
        CAPTURE(dim);
        CAPTURE(log);
        Tensor x = req(make_input(s, 17, DType::float64, -3, 3));
        auto fn = [dim, log](const std::vector<Tensor>& in) {
          return log ? ops::log_softmax(in[0], dim) : ops::softmax(in[0], dim);
        };
        CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
        CHECK_GRAD(fn, (std::vector<Tensor>{x}));
        if (x.dim() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
      }
    }
  }
  // Larger: long rows (inner = 1) and an inner size spanning two 256-wide blocks.
  for (const auto& c : std::vector<std::pair<Shape, int64_t>>{{{7, 1000}, 1}, {{2, 10, 300}, 1}, {{3, 40, 5}, 0}}) {
    const Shape& s = c.first;
    const int64_t dim = c.second;
    for (bool log : {false, true}) {
      CAPTURE(shape_str(s));
      CAPTURE(log);
      Tensor x = req(make_input(s, 18, DType::float64, -10, 10));
      auto fn = [dim = dim, log](const std::vector<Tensor>& in) {
        return log ? ops::log_softmax(in[0], dim) : ops::softmax(in[0], dim);
      };
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    }
  }
}
