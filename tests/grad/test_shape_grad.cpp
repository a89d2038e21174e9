// Shape ops: native float32 against ref float64 (outputs and input gradients) and
// finite-difference gradients: cat over every dim with different sizes, uneven split and chunk,
// stack, every pad mode (1-d and 2-d, crops), nearest and bilinear upsampling (sizes, scales,
// both align_corners, downsampling), with non-contiguous inputs and batch 1.
//   ctest --test-dir build -R grad.test_shape_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

TEST_CASE("cat over each dim with different sizes, stack") {
  for (int64_t dim = 0; dim < 4; ++dim) {
    CAPTURE(dim);
    Shape sa = {2, 3, 2, 3}, sb = sa, sc = sa;
    sb[size_t(dim)] = 1;
    sc[size_t(dim)] = 4;
    Tensor a = req(make_input(sa, 1)), b = req(make_input(sb, 2)), c = req(make_input(sc, 3));
    auto fn = [dim](const std::vector<Tensor>& in) { return ops::cat({in[0], in[1], in[2]}, dim); };
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{a, b, c}));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(a.detach())), b, req(non_contiguous(c.detach()))}));
    CHECK_GRAD(fn, (std::vector<Tensor>{a, b, c}));
    // An input that needs no gradient gets none, the others still do.
    CHECK_GRAD(fn, (std::vector<Tensor>{a, b.detach(), c}));
  }
  Tensor a = req(make_input({3, 2}, 4)), b = req(make_input({3, 2}, 5));
  auto st = [](const std::vector<Tensor>& in) { return ops::stack({in[0], in[1]}, 1); };
  CHECK_AGAINST_REF(st, (std::vector<Tensor>{a, b}));
  CHECK_GRAD(st, (std::vector<Tensor>{a, b}));
}

TEST_CASE("split and chunk are differentiable views") {
  Tensor x = req(make_input({2, 7, 3}, 6));
  // Weight the pieces differently so each one's gradient is visible.
  auto sp = [](const std::vector<Tensor>& in) {
    auto p = ops::split(in[0], {3, 1, 3}, 1);
    return ops::cat({p[2] * 3.0, p[0] * 2.0, p[1]}, 1);
  };
  CHECK_AGAINST_REF(sp, (std::vector<Tensor>{x}));
  CHECK_AGAINST_REF(sp, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
  CHECK_GRAD(sp, (std::vector<Tensor>{x}));
  auto one = [](const std::vector<Tensor>& in) { return ops::split(in[0], {2, 5}, -2)[1] * 2.0; };  // unused piece
  CHECK_GRAD(one, (std::vector<Tensor>{x}));
  auto ch = [](const std::vector<Tensor>& in) {
    auto p = ops::chunk(in[0], 3, 2);  // 3 = 1 + 1 + 1
    return p[0] * p[1] + p[2];
  };
  CHECK_GRAD(ch, (std::vector<Tensor>{x}));
}

TEST_CASE("pad: every mode, native vs ref, and gradients") {
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
  };
  std::vector<Case> cases = {
      {{2, 3, 5}, {2, 1}},
      {{1, 2, 4, 5}, {1, 2, 3, 2}},
      {{2, 1, 3, 4}, {0, 3, 2, 0}},
      {{1, 1, 5, 4}, {-1, 2, 1, -2}},  // crop and pad together
      {{3, 6}, {-2, 0}},
      {{1, 4, 4}, {3, 3, 3, 3}},
  };
  for (PadMode mode : {PadMode::constant, PadMode::reflect, PadMode::replicate, PadMode::circular}) {
    for (const Case& c : cases) {
      CAPTURE(pad_mode_name(mode));
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.pads));
      auto fn = [c, mode](const std::vector<Tensor>& in) { return ops::pad(in[0], c.pads, mode, 0.5); };
      Tensor x = req(make_input(c.x, 7));
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
    }
  }
  auto big = [](const std::vector<Tensor>& in) { return ops::pad(in[0], {2, 3, 1, 2}, PadMode::reflect); };
  CHECK_AGAINST_REF(big, (std::vector<Tensor>{req(make_input({2, 8, 17, 19}, 8))}));
}

TEST_CASE("upsample nearest and bilinear: native vs ref, and gradients") {
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, F>> fns = {
      {"nearest 5x7", [](auto& x) { return ops::upsample_nearest2d(x, {5, 7}); }},
      {"nearest x2", [](auto& x) { return ops::upsample_nearest2d(x, 2.0, 2.0); }},
      {"nearest x1.7,0.6", [](auto& x) { return ops::upsample_nearest2d(x, 1.7, 0.6); }},
      {"nearest down 2x2", [](auto& x) { return ops::upsample_nearest2d(x, {2, 2}); }},
      {"bilinear 5x7", [](auto& x) { return ops::upsample_bilinear2d(x, {5, 7}, false); }},
      {"bilinear 5x7 ac", [](auto& x) { return ops::upsample_bilinear2d(x, {5, 7}, true); }},
      {"bilinear x1.5", [](auto& x) { return ops::upsample_bilinear2d(x, 1.5, 1.5, false); }},
      {"bilinear x2.5 ac", [](auto& x) { return ops::upsample_bilinear2d(x, 2.5, 2.0, true); }},
      {"bilinear down 2x3", [](auto& x) { return ops::upsample_bilinear2d(x, {2, 3}, false); }},
      {"bilinear down 1x1 ac", [](auto& x) { return ops::upsample_bilinear2d(x, {1, 1}, true); }},
  };
  for (auto& entry : fns) {
    const char* name = entry.first;
    auto& f = entry.second;
    for (Shape s : {Shape{1, 1, 3, 4}, Shape{2, 3, 4, 3}}) {
      CAPTURE(name);
      CAPTURE(shape_str(s));
      auto fn = [f = f](const std::vector<Tensor>& in) { return f(in[0]); };
      Tensor x = req(make_input(s, 9));
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
    }
  }
  auto big = [](const std::vector<Tensor>& in) { return ops::upsample_bilinear2d(in[0], {33, 29}, false); };
  CHECK_AGAINST_REF(big, (std::vector<Tensor>{req(make_input({2, 4, 15, 13}, 10))}));
}
