// The fused ops, conv2d_relu and batch_norm_relu (training and eval): native float32 against ref
// float64 (outputs and the gradients of input, weight and bias), finite-difference gradients in
// float64, and equality with the unfused relu(conv2d) / relu(batch_norm); and the pooling ops that
// also return indices, max_pool2d_with_indices and adaptive_max_pool2d_with_indices: the same
// indices on both backends, the values' gradients by finite differences.
//   ctest --test-dir build -R grad.test_fused_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "engine/autograd.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;
using kiln::test::distinct_input;

namespace {

test::RefCompareOptions loose() {  // float32 sums of a few hundred products of magnitude ~1
  test::RefCompareOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-4;
  return o;
}

}  // namespace

TEST_CASE("conv2d_relu: native vs ref, gradients, and relu(conv2d)") {
  struct Case {
    Shape x, w;
    bool bias;
    ops::ConvHW stride, pad;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 3, 7, 6}, {4, 3, 3, 3}, true, 1, 1, 1},
                                   {{1, 4, 9, 8}, {6, 2, 3, 2}, false, 2, {1, 0}, 2},
                                   {{2, 3, 5, 5}, {3, 1, 3, 3}, true, 1, 1, 3}};  // depthwise
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    auto fused = [c](const std::vector<Tensor>& in) {
      return ops::conv2d_relu(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, 1, c.groups);
    };
    auto plain = [c](const std::vector<Tensor>& in) {
      return ops::relu(ops::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, 1, c.groups));
    };
    std::vector<Tensor> in = {req(make_input(c.x, 1)), req(make_input(c.w, 2))};
    if (c.bias) in.push_back(req(make_input({c.w[0]}, 3)));
    CHECK_AGAINST_REF(fused, in, loose());
    CHECK_GRAD(fused, in);
    std::vector<Tensor> nc = in;
    nc[0] = req(non_contiguous(in[0].detach()));
    CHECK_AGAINST_REF(fused, nc, loose());
    // The same values and gradients as the unfused pair (ref, float64).
    BackendGuard g("ref", true);
    Tensor y = fused(in), z = plain(in);
    CHECK_CLOSE(y, z, 1e-12, 1e-12);
    CHECK(ops::amax(ops::neg(y)).item() <= 0);  // no negative output
    CHECK(ops::amax(y).item() > 0);             // and not all clamped
  }
}

TEST_CASE("conv2d_sum: native vs ref, gradients of all four inputs, and relu(conv2d + residual)") {
  struct Case {
    Shape x, w;
    bool bias, relu;
    ops::ConvHW stride, pad;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 3, 7, 6}, {4, 3, 3, 3}, true, true, 1, 1, 1},
                                   {{1, 4, 9, 8}, {6, 2, 3, 2}, false, true, 2, {1, 0}, 2},
                                   {{2, 3, 5, 5}, {5, 3, 1, 1}, true, false, 1, 0, 1}};
  // against_ref runs strictly on one backend: native (whose convolution runs alone, then the add
  // and ReLU). oneDNN's fused kernel is compared with ref in kernels.test_conv_sum and the oracle.
  const std::vector<std::string> backends = {"native"};
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    auto fused = [c](const std::vector<Tensor>& in) {
      return ops::conv2d_sum(in[0], in[1], in[3].defined() ? in[3] : Tensor(), in[2], c.stride, c.pad, 1, c.groups,
                             c.relu);
    };
    auto plain = [c](const std::vector<Tensor>& in) {
      Tensor y = ops::add(ops::conv2d(in[0], in[1], in[3], c.stride, c.pad, 1, c.groups), in[2]);
      return c.relu ? ops::relu(y) : y;
    };
    Tensor x = req(make_input(c.x, 1)), w = req(make_input(c.w, 2));
    Shape out;
    {
      NoGradGuard ng;
      out = ops::conv2d(x, w, Tensor(), c.stride, c.pad, 1, c.groups).sizes();
    }
    std::vector<Tensor> in = {x, w, req(make_input(out, 4)), c.bias ? req(make_input({c.w[0]}, 3)) : Tensor()};
    if (!c.bias) in.pop_back();
    auto with_bias = [](test::Fn f) {  // in[3] may be missing: pass an undefined bias
      return [f](const std::vector<Tensor>& v) {
        std::vector<Tensor> a = v;
        if (a.size() < 4) a.push_back(Tensor());
        return f(a);
      };
    };
    for (const std::string& be : backends) {
      CAPTURE(be);
      test::RefCompareOptions o = loose();
      o.backend = be;
      CHECK_AGAINST_REF(with_bias(fused), in, o);
    }
    CHECK_GRAD(with_bias(fused), in);
    BackendGuard g("ref", true);
    CHECK_CLOSE(with_bias(fused)(in), with_bias(plain)(in), 1e-12, 1e-12);
  }
}

TEST_CASE("batch_norm_relu, training and eval: native vs ref, gradients, and relu(batch_norm)") {
  for (Shape s : {Shape{6, 3}, Shape{2, 3, 4, 5}, Shape{1, 2, 3, 3}}) {
    for (bool training : {true, false}) {
      CAPTURE(shape_str(s));
      CAPTURE(training);
      const int64_t C = s[1];
      Tensor x = req(make_input(s, 4, DType::float64, -2, 2));
      Tensor w = req(make_input({C}, 5, DType::float64, 0.5, 1.5)), b = req(make_input({C}, 6));
      Tensor rm = make_input({C}, 7), rv = make_input({C}, 8, DType::float64, 0.5, 2);
      auto fused = [training](const std::vector<Tensor>& in) {
        return ops::batch_norm_relu(in[0], in[1], in[2], in[3], in[4], training, 0.1, 1e-5);
      };
      auto plain = [training](const std::vector<Tensor>& in) {
        return ops::relu(ops::batch_norm(in[0], in[1], in[2], in[3], in[4], training, 0.1, 1e-5));
      };
      // Fresh running statistics for every call that updates them.
      auto ins = [&](const Tensor& xx) {
        return std::vector<Tensor>{xx, w, b, rm.clone(), rv.clone()};
      };
      CHECK_AGAINST_REF(fused, ins(x));
      CHECK_GRAD(fused, ins(x));
      CHECK_AGAINST_REF(fused, ins(req(non_contiguous(x.detach()))));
      BackendGuard g("ref", true);
      std::vector<Tensor> a = ins(x), p = ins(x);
      CHECK_CLOSE(fused(a), plain(p), 1e-12, 1e-12);
      CHECK_CLOSE(a[3], p[3], 1e-15, 0);  // the running statistics move the same way
      CHECK_CLOSE(a[4], p[4], 1e-15, 0);
    }
  }
}

TEST_CASE("max_pool2d_with_indices and adaptive_max_pool2d_with_indices: indices as ref, values' gradients") {
  Tensor x = req(distinct_input({2, 3, 7, 6}, 3));
  auto pooled = [](const std::vector<Tensor>& in) {
    return ops::max_pool2d_with_indices(in[0], {3, 2}, {2, 2}, {1, 1}, {1, 1}, true).values;
  };
  auto adaptive = [](const std::vector<Tensor>& in) {
    return ops::adaptive_max_pool2d_with_indices(in[0], {3, 4}).values;
  };
  for (const test::Fn& f : {test::Fn(pooled), test::Fn(adaptive)}) {
    CHECK_AGAINST_REF(f, (std::vector<Tensor>{x}));
    CHECK_GRAD(f, (std::vector<Tensor>{x}));
  }
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    auto run = [&](const char* backend, DType dt) {
      BackendGuard g(backend, true);
      Tensor xx = x.detach().to(dt);
      return which == 0 ? ops::max_pool2d_with_indices(xx, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true)
                        : ops::adaptive_max_pool2d_with_indices(xx, {3, 4});
    };
    ops::ValuesIndices r = run("ref", DType::float64), n = run("native", DType::float32);
    CHECK(n.indices.dtype() == DType::int64);
    CHECK(n.indices.sizes() == r.values.sizes());
    CHECK(n.indices.to_vector() == r.indices.to_vector());
    // Each value is the input at its index, in its plane.
    const std::vector<double> xv = x.detach().to_vector(), v = r.values.to_vector(), idx = r.indices.to_vector();
    const int64_t plane = 7 * 6, per_plane = int64_t(v.size()) / 6;
    for (size_t i = 0; i < v.size(); ++i) CHECK(xv[size_t(int64_t(i) / per_plane * plane + int64_t(idx[i]))] == v[i]);
  }
}
