// conv2d and conv_transpose2d: native float32 against ref float64 (outputs and the gradients of
// input, weight and bias) and finite-difference gradients, over batch 1 and >1, odd and
// rectangular inputs, strides 1/2/3, padding 0/1/2, dilation 1/2, groups 1/2/depthwise, 1x1 and
// 3x3/5x5/3x2 kernels, bias on and off, and non-contiguous inputs.
//   ctest --test-dir build -R grad.test_conv_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

using namespace kiln;
using kiln::ops::ConvHW;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

namespace {

struct Case {
  Shape x, w;
  bool bias;
  ConvHW stride, pad, dil;
  int64_t groups;
  ConvHW out_pad = 0;  // conv_transpose2d only
};

std::string name(const Case& c) {
  return "x" + shape_str(c.x) + " w" + shape_str(c.w) + (c.bias ? " bias" : "") + " s" + c.stride.str() + " p" +
         c.pad.str() + " d" + c.dil.str() + " g" + std::to_string(c.groups) + " op" + c.out_pad.str();
}

test::Fn conv_fn(const Case& c) {
  return [c](const std::vector<Tensor>& in) {
    return ops::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, c.dil, c.groups);
  };
}

test::Fn tconv_fn(const Case& c) {
  return [c](const std::vector<Tensor>& in) {
    return ops::conv_transpose2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, c.out_pad, c.dil,
                                 c.groups);
  };
}

std::vector<Tensor> inputs(const Case& c, int64_t out_channels, bool x_grad = true) {
  std::vector<Tensor> in = {make_input(c.x, 1), req(make_input(c.w, 2))};
  if (x_grad) req(in[0]);
  if (c.bias) in.push_back(req(make_input({out_channels}, 3)));
  return in;
}

// float32 sums of up to a few hundred products of magnitude ~1 (weight gradients sum over the
// batch and every output position): 1e-4 absolute covers their rounding.
test::RefCompareOptions ref_opts() {
  test::RefCompareOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  return o;
}

}  // namespace

TEST_CASE("conv2d: native vs ref") {
  std::vector<Case> cases = {
      {{2, 3, 9, 11}, {4, 3, 3, 3}, true, 1, 1, 1, 1},                         // batch >1, odd, rectangular
      {{1, 4, 10, 9}, {6, 2, 3, 2}, false, 2, ConvHW(1, 0), 1, 2},             // batch 1, 3x2, groups 2
      {{3, 4, 11, 11}, {4, 1, 3, 3}, true, 1, 2, 2, 4},                        // depthwise, dilation 2
      {{2, 4, 9, 9}, {8, 1, 3, 3}, false, 2, 1, 1, 4},                         // depthwise x2 channels
      {{2, 8, 7, 9}, {5, 8, 1, 1}, true, 1, 0, 1, 1},                          // 1x1 direct
      {{1, 6, 7, 5}, {4, 3, 1, 1}, false, 1, 0, 1, 2},                         // 1x1 direct, groups, batch 1
      {{1, 3, 8, 8}, {4, 3, 1, 1}, true, 2, 0, 1, 1},                          // 1x1 strided
      {{2, 6, 13, 12}, {6, 3, 5, 5}, false, 3, 2, 1, 2},                       // 5x5, stride 3, pad 2
      {{1, 2, 6, 7}, {3, 2, 3, 3}, true, ConvHW(1, 2), 0, ConvHW(2, 1), 1},    // mixed stride, dilation
      {{3, 5, 12, 10}, {7, 5, 3, 3}, true, 1, 1, 1, 1},                        // odd batch on 2 threads
  };
  for (const Case& c : cases) {
    CAPTURE(name(c));
    auto f = conv_fn(c);
    CHECK_AGAINST_REF(f, inputs(c, c.w[0]), ref_opts());
    std::vector<Tensor> nc = inputs(c, c.w[0]);
    nc[0] = req(non_contiguous(nc[0].detach()));
    nc[1] = req(non_contiguous(nc[1].detach()));
    CHECK_AGAINST_REF(f, nc, ref_opts());
  }
  // Only weight and bias need gradients (input is data): the backward-data pass is skipped.
  Case c = {{2, 3, 6, 6}, {4, 3, 3, 3}, true, 1, 1, 1, 1};
  CHECK_AGAINST_REF(conv_fn(c), inputs(c, 4, /*x_grad=*/false), ref_opts());
}

TEST_CASE("conv2d: finite-difference gradients") {
  std::vector<Case> cases = {
      {{1, 2, 5, 5}, {2, 2, 3, 3}, true, 1, 1, 1, 1},
      {{2, 2, 5, 4}, {2, 1, 3, 2}, false, 2, ConvHW(1, 0), 1, 2},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, true, 1, 2, 2, 3},
      {{2, 3, 3, 4}, {2, 3, 1, 1}, true, 1, 0, 1, 1},
      {{1, 1, 7, 7}, {1, 1, 5, 5}, false, 3, 2, 1, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(name(c));
    CHECK_GRAD(conv_fn(c), inputs(c, c.w[0]));
  }
}

TEST_CASE("conv2d: output shapes follow PyTorch") {
  Tensor x = zeros({2, 3, 10, 7});
  CHECK(ops::conv2d(x, zeros({4, 3, 3, 3}), Tensor(), 1, 1).sizes() == Shape{2, 4, 10, 7});
  CHECK(ops::conv2d(x, zeros({4, 3, 3, 2}), Tensor(), 2, 0).sizes() == Shape{2, 4, 4, 3});
  CHECK(ops::conv2d(x, zeros({6, 1, 3, 3}), Tensor(), 3, 2, 2, 3).sizes() == Shape{2, 6, 4, 3});
  CHECK(ops::conv2d(x, zeros({5, 3, 1, 1})).sizes() == Shape{2, 5, 10, 7});
  CHECK(ops::conv2d(x, zeros({5, 3, 10, 7})).sizes() == Shape{2, 5, 1, 1});
}

TEST_CASE("conv_transpose2d: native vs ref") {
  std::vector<Case> cases = {
      {{2, 4, 5, 6}, {4, 3, 3, 3}, true, 2, 1, 1, 1, 1},                            // stride 2 + output_padding 1
      {{1, 4, 4, 5}, {4, 2, 3, 2}, false, ConvHW(2, 1), ConvHW(0, 1), 1, 2, ConvHW(1, 0)},  // groups 2
      {{2, 3, 5, 5}, {3, 2, 3, 3}, true, 1, 1, 2, 1, 1},                            // output_padding < dilation
      {{1, 6, 4, 4}, {6, 1, 3, 3}, true, 2, 1, 1, 6, 1},                            // depthwise
      {{2, 4, 6, 6}, {4, 5, 1, 1}, false, 1, 0, 1, 1},                              // 1x1
      {{1, 2, 3, 4}, {2, 3, 5, 5}, true, 3, 2, 1, 1, 2},                            // 5x5, stride 3
  };
  for (const Case& c : cases) {
    CAPTURE(name(c));
    auto f = tconv_fn(c);
    CHECK_AGAINST_REF(f, inputs(c, c.w[1] * c.groups), ref_opts());
    std::vector<Tensor> nc = inputs(c, c.w[1] * c.groups);
    nc[0] = req(non_contiguous(nc[0].detach()));
    CHECK_AGAINST_REF(f, nc, ref_opts());
  }
}

TEST_CASE("conv_transpose2d: finite-difference gradients and shapes") {
  std::vector<Case> cases = {
      {{1, 2, 3, 3}, {2, 2, 3, 3}, true, 2, 1, 1, 1, 1},
      {{1, 2, 3, 2}, {2, 1, 2, 3}, false, ConvHW(1, 2), 0, 1, 2, ConvHW(0, 1)},
      {{2, 1, 3, 3}, {1, 2, 3, 3}, true, 1, 1, 2, 1, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(name(c));
    CHECK_GRAD(tconv_fn(c), inputs(c, c.w[1] * c.groups));
  }
  // Transposed convolution inverts conv2d's shape map (output_padding picks among the sizes
  // that a strided conv2d maps to the same output).
  Tensor y = ops::conv_transpose2d(zeros({2, 4, 5, 6}), zeros({4, 3, 3, 3}), Tensor(), 2, 1, 1);
  CHECK(y.sizes() == Shape{2, 3, 10, 12});
  CHECK(ops::conv2d(y, zeros({4, 3, 3, 3}), Tensor(), 2, 1).sizes() == Shape{2, 4, 5, 6});
  CHECK(ops::conv_transpose2d(zeros({1, 4, 4, 4}), zeros({4, 1, 3, 3}), Tensor(), 1, 1, 1, 2, 2).sizes() ==
        Shape{1, 2, 7, 7});
}

TEST_CASE("conv2d is the adjoint of conv_transpose2d") {
  // With the same weight, conv_transpose2d's forward is conv2d's backward-data: <conv(x), y> =
  // <x, conv_t(y)>, on both backends.
  for (const char* backend : {"ref", "native"}) {
    CAPTURE(backend);
    BackendGuard g(backend);
    const DType dt = std::string(backend) == "ref" ? DType::float64 : DType::float32;
    Tensor x = make_input({2, 4, 9, 8}, 1, dt), w = make_input({6, 2, 3, 3}, 2, dt);
    Tensor y = ops::conv2d(x, w, Tensor(), 2, 1, 1, 2);
    Tensor v = make_input(y.sizes(), 3, dt);
    Tensor xt = ops::conv_transpose2d(v, w, Tensor(), 2, 1, ConvHW(0, 1), 1, 2);
    REQUIRE(xt.sizes() == x.sizes());
    const double a = ops::sum(y * v).item(), b = ops::sum(x * xt).item();
    CHECK(a == doctest::Approx(b).epsilon(dt == DType::float64 ? 1e-12 : 1e-5));
  }
}
