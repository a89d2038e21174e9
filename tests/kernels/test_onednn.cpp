// The oneDNN backend ("onednn") against the ref oracle: every onednn kernel (conv forward,
// backward-data, backward-weights; gemm; average pooling; LRN; batch norm; softmax; eltwise
// activations and their backward) in float32 vs ref in float64, outputs and gradients, over the
// kinds of shapes the family grad tests use; supports() saying no where the mapping is not exact;
// the primitive cache; errors; and a net whose layers run on different backends.
// Without oneDNN (KILN_HAVE_ONEDNN unset) the test is Skipped, and fails under CI=true
// (tools/install-deps.sh --all installs libdnnl-dev).
//   ctest --test-dir build -R test_onednn
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#ifdef KILN_HAVE_ONEDNN

#include <cmath>
#include <limits>

#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/conv.h"
#include "kernels/cpu/onednn/dnnl_common.h"
#include "kernels/cpu/onednn/elementwise.h"
#include "kernels/cpu/onednn/gemm.h"
#include "kernels/cpu/onednn/norm.h"
#include "kernels/cpu/onednn/pool.h"
#include "kernels/cpu/ref/gemm.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"

using namespace kiln;
using kiln::ops::ConvHW;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;

namespace {

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }
std::vector<float> floats(int64_t n, uint64_t seed) {
  std::vector<double> v = make_input({n}, seed).to_vector();
  return std::vector<float>(v.begin(), v.end());
}

// onednn first; native only for the ops around the one under test (mul and sum of the
// harness, copies). Each test also checks that oneDNN really ran (execution counter).
test::RefCompareOptions onednn_opts(double rtol = 1e-4, double atol = 1e-4) {
  test::RefCompareOptions o;
  o.backend = "onednn,native";
  o.rtol = rtol;
  o.atol = atol;
  return o;
}

uint64_t executions() { return onednn::stats().executions; }

struct ConvCase {
  Shape x, w;
  bool bias;
  ConvHW stride, pad, dil;
  int64_t groups;
};

std::string name(const ConvCase& c) {
  return "x" + shape_str(c.x) + " w" + shape_str(c.w) + (c.bias ? " bias" : "") + " s" + c.stride.str() + " p" +
         c.pad.str() + " d" + c.dil.str() + " g" + std::to_string(c.groups);
}

ConvDesc conv_desc(const ConvCase& c) {
  ConvDesc d;
  d.N = c.x[0], d.C = c.x[1], d.H = c.x[2], d.W = c.x[3];
  d.K = c.w[0], d.R = c.w[2], d.S = c.w[3];
  d.stride_h = c.stride.h, d.stride_w = c.stride.w, d.pad_h = c.pad.h, d.pad_w = c.pad.w;
  d.dilation_h = c.dil.h, d.dilation_w = c.dil.w, d.groups = c.groups, d.has_bias = c.bias;
  d.set_output_size();
  return d;
}

}  // namespace

TEST_CASE("onednn conv2d: forward, backward-data and backward-weights vs ref") {
  const std::vector<ConvCase> cases = {
      {{2, 3, 9, 11}, {4, 3, 3, 3}, true, 1, 1, 1, 1},                       // batch >1, odd, rectangular
      {{1, 4, 10, 9}, {6, 2, 3, 2}, false, 2, ConvHW(1, 0), 1, 2},           // batch 1, 3x2, groups 2
      {{3, 4, 11, 11}, {4, 1, 3, 3}, true, 1, 2, 2, 4},                      // depthwise, dilation 2
      {{2, 4, 9, 9}, {8, 1, 3, 3}, false, 2, 1, 1, 4},                       // depthwise x2 channels
      {{2, 8, 7, 9}, {5, 8, 1, 1}, true, 1, 0, 1, 1},                        // 1x1
      {{1, 3, 8, 8}, {4, 3, 1, 1}, true, 2, 0, 1, 1},                        // 1x1 strided (pad_r < 0)
      {{2, 6, 13, 12}, {6, 3, 5, 5}, false, 3, 2, 1, 2},                     // 5x5, stride 3, pad 2
      {{1, 2, 6, 7}, {3, 2, 3, 3}, true, ConvHW(1, 2), 0, ConvHW(2, 1), 1},  // mixed stride, dilation
      {{2, 16, 10, 10}, {32, 16, 3, 3}, true, 1, 1, 1, 1},                   // blocked layouts (16 channels)
  };
  for (const ConvCase& c : cases) {
    CAPTURE(name(c));
    const ConvDesc d = conv_desc(c);
    CHECK(onednn::supports_conv_fwd(d));
    CHECK(onednn::supports_conv_bwd_data(d));
    CHECK(onednn::supports_conv_bwd_weights(d));
    auto f = [c](const std::vector<Tensor>& in) {
      return ops::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, c.dil, c.groups);
    };
    std::vector<Tensor> in = {req(make_input(c.x, 1)), req(make_input(c.w, 2))};
    if (c.bias) in.push_back(req(make_input({c.w[0]}, 3)));
    const uint64_t before = executions();
    CHECK_AGAINST_REF(f, in, onednn_opts());
    CHECK(executions() >= before + 3);  // forward, backward-data, backward-weights
    in[0] = req(non_contiguous(in[0].detach()));
    in[1] = req(non_contiguous(in[1].detach()));
    CHECK_AGAINST_REF(f, in, onednn_opts());
  }
  // Weight and bias gradients only (no backward-data), and bias gradient only.
  ConvCase c = {{2, 3, 6, 6}, {4, 3, 3, 3}, true, 1, 1, 1, 1};
  auto f = [c](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], in[2], c.stride, c.pad); };
  CHECK_AGAINST_REF(f, (std::vector<Tensor>{make_input(c.x, 1), req(make_input(c.w, 2)), req(make_input({4}, 3))}),
                    onednn_opts());
  CHECK_AGAINST_REF(f, (std::vector<Tensor>{make_input(c.x, 1), make_input(c.w, 2), req(make_input({4}, 3))}),
                    onednn_opts());
  // float64 is not oneDNN's: supports() says no, so dispatch falls back.
  ConvDesc d64 = conv_desc(c);
  d64.dtype = DType::float64;
  CHECK_FALSE(onednn::supports_conv_fwd(d64));
  CHECK_THROWS_KILN(onednn::conv2d_fwd(d64, nullptr, nullptr, nullptr, nullptr), "conv2d_fwd");
}

TEST_CASE("onednn errors name the op, the call, the shapes and oneDNN's message") {
  ConvCase c = {{2, 3, 6, 6}, {4, 3, 3, 3}, true, 1, 1, 1, 1};
  const ConvDesc d = conv_desc(c);
  auto fail = [&] { KILN_DNNL("conv2d_fwd", d, throw dnnl::error(dnnl_unimplemented, "no implementation")); };
  CHECK_THROWS_KILN(fail(), "conv2d_fwd: oneDNN call throw dnnl::error(dnnl_unimplemented");
  CHECK_THROWS_KILN(fail(), "mb2ic3ih6iw6oc4oh6ow6kh3kw3");
  CHECK_THROWS_KILN(fail(), ": no implementation (status unimplemented)");
}

TEST_CASE("onednn conv_transpose2d (backward-data as forward, bottom/right padding other than top/left)") {
  struct Case {
    Shape x, w;
    bool bias;
    ConvHW stride, pad, out_pad, dil;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{2, 4, 5, 6}, {4, 3, 3, 3}, true, 2, 1, 1, 1, 1},
      {{1, 4, 4, 5}, {4, 2, 3, 2}, false, ConvHW(2, 1), ConvHW(0, 1), ConvHW(1, 0), 1, 2},
      {{2, 3, 5, 5}, {3, 2, 3, 3}, true, 1, 1, 1, 2, 1},  // output_padding < dilation: pad_r < 0 at stride 1
      {{1, 6, 4, 4}, {6, 1, 3, 3}, true, 2, 1, 1, 1, 6},
      {{1, 2, 3, 4}, {2, 3, 5, 5}, true, 3, 2, 2, 1, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    auto f = [c](const std::vector<Tensor>& in) {
      return ops::conv_transpose2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.pad, c.out_pad, c.dil,
                                   c.groups);
    };
    std::vector<Tensor> in = {req(make_input(c.x, 1)), req(make_input(c.w, 2))};
    if (c.bias) in.push_back(req(make_input({c.w[1] * c.groups}, 3)));
    CHECK_AGAINST_REF(f, in, onednn_opts());
  }
}

TEST_CASE("onednn gemm: transposes, leading dimensions, alpha/beta, batches") {
  // Through the ops: plain, transposed views, batched, broadcast batch, linear.
  const uint64_t before = executions();
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{req(make_input({7, 13}, 1)), req(make_input({13, 5}, 2))}),
                    onednn_opts());
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{req(make_input({13, 7}, 1).t()), req(make_input({5, 13}, 2).t())}),
                    onednn_opts());
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{req(make_input({4, 6, 9}, 3)), req(make_input({4, 9, 3}, 4))}),
                    onednn_opts());
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{req(make_input({5, 6, 9}, 3)), req(make_input({9, 3}, 4))}),
                    onednn_opts());
  auto lin = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); };
  CHECK_AGAINST_REF(lin, (std::vector<Tensor>{req(make_input({1, 300}, 5)), req(make_input({70, 300}, 6)),
                                              req(make_input({70}, 7))}),
                    onednn_opts(1e-4, 2e-4));
  CHECK(executions() > before);

  // The kernel directly, against the ref kernel: lda/ldb/ldc wider than the matrix, alpha,
  // beta == 0 never reading C (NaN there), beta != 0 accumulating, strided batches.
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, 0.5}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        GemmDesc d;
        d.trans_a = ta, d.trans_b = tb, d.m = 9, d.n = 11, d.k = 17;
        d.lda = (ta ? d.m : d.k) + 3, d.ldb = (tb ? d.k : d.n) + 2, d.ldc = d.n + 5;
        d.alpha = 1.5, d.beta = beta, d.batch = 3;
        d.stride_a = (ta ? d.k : d.m) * d.lda, d.stride_b = (tb ? d.n : d.k) * d.ldb, d.stride_c = d.m * d.ldc;
        REQUIRE(onednn::supports_gemm(d));
        std::vector<float> a = floats(d.batch * d.stride_a, 1);
        std::vector<float> b = floats(d.batch * d.stride_b, 2);
        std::vector<float> c0 = floats(d.batch * d.stride_c, 3);
        if (beta == 0) std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> c_ref = c0, c_dnn = c0;
        ref::gemm<float>(d, a.data(), b.data(), c_ref.data());
        onednn::gemm(d, a.data(), b.data(), c_dnn.data());
        int bad = 0;
        for (int64_t i = 0; i < d.batch; ++i)
          for (int64_t r = 0; r < d.m; ++r)
            for (int64_t j = 0; j < d.n; ++j) {
              const size_t at = size_t(i * d.stride_c + r * d.ldc + j);
              bad += !(std::abs(c_dnn[at] - c_ref[at]) <= 1e-4f * (1 + std::abs(c_ref[at])));
            }
        CHECK(bad == 0);
      }
  GemmDesc d64;
  d64.dtype = DType::float64, d64.m = d64.n = d64.k = d64.lda = d64.ldb = d64.ldc = 2;
  CHECK_FALSE(onednn::supports_gemm(d64));
}

TEST_CASE("onednn average pooling; max pooling stays native") {
  struct Case {
    Shape x;
    std::array<int64_t, 2> k, s, p;
    bool ceil, include_pad;
    bool on_onednn;  // whether oneDNN's divisor matches PyTorch's here
  };
  const std::vector<Case> cases = {
      {{2, 3, 9, 11}, {3, 3}, {2, 2}, {1, 1}, false, true, true},
      {{2, 3, 9, 11}, {3, 3}, {2, 2}, {1, 1}, false, false, true},
      {{1, 4, 7, 6}, {3, 2}, {1, 2}, {1, 0}, false, true, true},
      {{2, 2, 8, 9}, {3, 3}, {2, 2}, {0, 0}, true, false, true},   // ceil, exclude pad
      {{2, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1}, true, true, true},    // ceil mode that adds no window
      {{2, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1}, true, true, false},   // a ceil window past the padding: native
      {{2, 2, 8, 9}, {3, 3}, {2, 2}, {0, 0}, true, true, false},
      {{1, 16, 14, 14}, {2, 2}, {2, 2}, {0, 0}, false, true, true},
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.ceil);
    CAPTURE(c.include_pad);
    auto f = [c](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], c.k, c.s, c.p, c.ceil, c.include_pad); };
    const uint64_t before = executions();
    CHECK_AGAINST_REF(f, one(req(make_input(c.x, 1))), onednn_opts(1e-5, 1e-6));
    CHECK((executions() >= before + 2) == c.on_onednn);
    CHECK_AGAINST_REF(f, one(req(non_contiguous(make_input(c.x, 1)))), onednn_opts(1e-5, 1e-6));
  }
  // divisor_override and max pooling: not oneDNN's (supports() says no), results still right.
  PoolDesc d;
  d.n = 1, d.c = 2, d.ih = d.iw = 6, d.oh = d.ow = 3, d.kh = d.kw = 2, d.sh = d.sw = 2;
  d.alg = PoolAlg::avg;
  CHECK(onednn::supports_pool_fwd(d));
  CHECK(onednn::supports_pool_bwd(d));
  d.divisor_override = 3;
  CHECK_FALSE(onednn::supports_pool_fwd(d));
  d.divisor_override = 0;
  d.alg = PoolAlg::max;
  CHECK_FALSE(onednn::supports_pool_fwd(d));
  CHECK_FALSE(onednn::supports_pool_bwd(d));
  CHECK_THROWS_KILN(onednn::pool_fwd(d, nullptr, nullptr, nullptr), "does not map onto oneDNN pooling");
  auto mp = [](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}); };
  CHECK_AGAINST_REF(mp, one(req(make_input({2, 3, 9, 8}, 4))), onednn_opts(1e-6, 1e-6));
}

TEST_CASE("onednn LRN: alpha divided by size (kiln's and PyTorch's convention), forward and backward") {
  // Hand-computed: channels (1, 2, 3), size 3, alpha 3, beta 1, k 1: the middle channel's scale
  // is 1 + 3/3 * (1 + 4 + 9) = 15, so y = 2/15 (alpha not divided by size would give 2/43).
  {
    BackendGuard g("onednn,native", true);
    const uint64_t before = executions();
    Tensor x = from_vector(std::vector<double>{1, 2, 3}, {1, 3, 1, 1}).to(DType::float32);
    Tensor y = ops::local_response_norm(x, 3, 3.0, 1.0, 1.0);
    CHECK(executions() > before);
    CHECK(y.to_vector()[1] == doctest::Approx(2.0 / 15.0).epsilon(1e-6));
    CHECK(y.to_vector()[0] == doctest::Approx(1.0 / (1 + 5)).epsilon(1e-6));  // window {1, 2}: 1 + (1+4)
  }
  struct Case {
    Shape x;
    int64_t size;
    double alpha, beta, k;
  };
  for (const Case& c : std::vector<Case>{{{2, 7, 5, 6}, 5, 1e-2, 0.75, 1.0},
                                         {{1, 5, 4, 3}, 3, 0.5, 0.6, 2.0},
                                         {{2, 20, 9, 9}, 5, 1e-1, 0.75, 2.0},
                                         {{3, 6, 7}, 3, 0.2, 0.75, 1.0}}) {  // 3-d input
    CAPTURE(shape_str(c.x));
    auto f = [c](const std::vector<Tensor>& in) {
      return ops::local_response_norm(in[0], c.size, c.alpha, c.beta, c.k);
    };
    const uint64_t before = executions();
    CHECK_AGAINST_REF(f, one(req(make_input(c.x, 1, DType::float64, -2, 2))), onednn_opts(1e-4, 1e-5));
    CHECK(executions() >= before + 2);
    CHECK_AGAINST_REF(f, one(req(non_contiguous(make_input(c.x, 1, DType::float64, -2, 2)))), onednn_opts(1e-4, 1e-5));
  }
  // Even sizes: oneDNN's window is symmetric, kiln's is not: native runs them.
  LrnDesc d;
  d.c = 6, d.inner = 4, d.size = 4;
  CHECK_FALSE(onednn::supports_lrn(d));
  d.size = 5;
  CHECK(onednn::supports_lrn(d));
  d.size = 1;  // oneDNN 3.7 crashes making its backward primitive (kernels/cpu/onednn/pool.cpp)
  CHECK_FALSE(onednn::supports_lrn(d));
  auto f4 = [](const std::vector<Tensor>& in) { return ops::local_response_norm(in[0], 4, 0.1, 0.75, 1.0); };
  CHECK_AGAINST_REF(f4, one(req(make_input({2, 6, 3, 3}, 2))), onednn_opts(1e-4, 1e-5));
}

TEST_CASE("onednn batch norm: training and eval, affine or not, saved statistics and running stats") {
  for (Shape s : {Shape{8, 16, 7, 9}, Shape{37, 30}, Shape{1, 3, 5, 4}, Shape{4, 5, 3}}) {
    for (bool training : {true, false}) {
      for (bool affine : {true, false}) {
        CAPTURE(shape_str(s));
        CAPTURE(training);
        CAPTURE(affine);
        const int64_t C = s[1];
        Tensor x = req(make_input(s, 4, DType::float64, -3, 1));
        Tensor w = affine ? req(make_input({C}, 5, DType::float64, 0.5, 1.5)) : Tensor();
        Tensor b = affine ? req(make_input({C}, 6)) : Tensor();
        Tensor rm = make_input({C}, 14), rv = make_input({C}, 15, DType::float64, 0.5, 2);
        auto fn = [training, rm, rv](const std::vector<Tensor>& in) {
          return ops::batch_norm(in[0], in[1], in[2], training ? Tensor() : rm.to(in[0].dtype()),
                                 training ? Tensor() : rv.to(in[0].dtype()), training);
        };
        const uint64_t before = executions();
        CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x, w, b}), onednn_opts(2e-4, 5e-5));
        CHECK(executions() >= before + 2);
        x = req(non_contiguous(x.detach()));
        CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x, w, b}), onednn_opts(2e-4, 5e-5));
      }
    }
  }
  // Running statistics (unbiased variance, momentum) and the saved mean / invstd.
  for (Shape s : {Shape{37, 13}, Shape{4, 6, 5, 7}}) {
    CAPTURE(shape_str(s));
    Tensor x = make_input(s, 8, DType::float64, -1, 3);
    Tensor rm_r = make_input({s[1]}, 9), rv_r = make_input({s[1]}, 10, DType::float64, 0.5, 2);
    Tensor rm_o = rm_r.to(DType::float32), rv_o = rv_r.to(DType::float32);
    {
      BackendGuard g("ref", true);
      ops::batch_norm(x, Tensor(), Tensor(), rm_r, rv_r, true, 0.3);
    }
    {
      BackendGuard g("onednn,native", true);
      ops::batch_norm(x.to(DType::float32), Tensor(), Tensor(), rm_o, rv_o, true, 0.3);
    }
    CHECK_CLOSE(rm_o, rm_r, 1e-5, 1e-6);
    CHECK_CLOSE(rv_o, rv_r, 1e-5, 1e-6);
  }
}

TEST_CASE("onednn softmax and log-softmax, forward and backward") {
  for (bool log : {false, true})
    for (const auto& c : std::vector<std::pair<Shape, int64_t>>{
             {{4, 10}, 1}, {{3, 7, 5}, 1}, {{6, 5}, 0}, {{2, 3, 4, 5}, 3}, {{1, 1000}, 1}}) {
      const Shape& shape = c.first;
      const int64_t dim = c.second;
      CAPTURE(log);
      CAPTURE(shape_str(shape));
      auto f = [log, dim = dim](const std::vector<Tensor>& in) {
        return log ? ops::log_softmax(in[0], dim) : ops::softmax(in[0], dim);
      };
      const uint64_t before = executions();
      // log-softmax's gradient dy - exp(y) * sum(dy) cancels: float32 sums of ~1000 terms of ~1
      // leave ~1e-5 absolute.
      CHECK_AGAINST_REF(f, one(req(make_input(shape, 3, DType::float64, -4, 4))), onednn_opts(1e-4, 2e-5));
      CHECK(executions() >= before + 2);
    }
}

TEST_CASE("onednn eltwise activations and their backward") {
  const std::vector<std::pair<const char*, test::Fn>> acts = {
      {"relu", [](const std::vector<Tensor>& in) { return ops::relu(in[0]); }},
      {"leaky_relu", [](const std::vector<Tensor>& in) { return ops::leaky_relu(in[0], 0.1); }},
      {"sigmoid", [](const std::vector<Tensor>& in) { return ops::sigmoid(in[0]); }},
      {"tanh", [](const std::vector<Tensor>& in) { return ops::tanh(in[0]); }},
      {"gelu", [](const std::vector<Tensor>& in) { return ops::gelu(in[0]); }},
  };
  for (const auto& entry : acts) {
    const char* name = entry.first;
    const auto& f = entry.second;
    CAPTURE(name);
    for (Shape s : {Shape{3, 5, 7}, Shape{1}, Shape{70000}}) {
      const uint64_t before = executions();
      CHECK_AGAINST_REF(f, one(req(make_input(s, 5, DType::float64, -3, 3))), onednn_opts(1e-5, 1e-6));
      CHECK(executions() >= before + 2);
    }
    CHECK_AGAINST_REF(f, one(req(non_contiguous(make_input({4, 9}, 6, DType::float64, -3, 3)))), onednn_opts(1e-5, 1e-6));
  }
  UnaryDesc u;
  u.op = UnaryOp::exp;  // not an activation: native's
  u.loop.ndim = 1, u.loop.noperands = 2, u.loop.sizes[0] = 8, u.loop.strides[0][0] = u.loop.strides[1][0] = 1;
  CHECK_FALSE(onednn::supports_unary(u));
  u.op = UnaryOp::relu;
  CHECK(onednn::supports_unary(u));
  u.loop.strides[1][0] = 2;  // strided source
  CHECK_FALSE(onednn::supports_unary(u));
}

TEST_CASE("onednn primitives are cached per shape") {
  onednn::clear_cache();
  Tensor x = make_input({2, 8, 10, 10}, 1, DType::float32), w = make_input({8, 8, 3, 3}, 2, DType::float32);
  BackendGuard g("onednn,native", true);
  ops::conv2d(x, w, Tensor(), 1, 1);
  const onednn::Stats first = onednn::stats();
  CHECK(first.primitives_created >= 1);
  ops::conv2d(x, w, Tensor(), 1, 1);
  ops::conv2d(x, w, Tensor(), 1, 1);
  const onednn::Stats again = onednn::stats();
  CHECK(again.primitives_created == first.primitives_created);
  CHECK(again.cache_hits > first.cache_hits);
  CHECK(again.executions >= first.executions + 2);
  ops::conv2d(make_input({3, 8, 10, 10}, 1, DType::float32), w, Tensor(), 1, 1);  // another shape
  CHECK(onednn::stats().primitives_created > again.primitives_created);
  // The library loaded is the major version the backend was compiled against (2.6+ or 3.x).
  CHECK(std::string(onednn::version()).rfind(std::to_string(DNNL_VERSION_MAJOR) + ".", 0) == 0);
}

TEST_CASE("a net mixing backends layer by layer matches the all-ref result") {
  auto conv1 = std::make_shared<Conv2d>(3, 8, 3, 1, 1);
  auto bn = std::make_shared<BatchNorm2d>(8);
  auto pool = std::make_shared<MaxPool2d>(2);
  auto conv2 = std::make_shared<Conv2d>(8, 6, 3, 2, 1);
  auto avg = std::make_shared<AvgPool2d>(std::array<int64_t, 2>{2, 2}, std::array<int64_t, 2>{2, 2});
  auto fc = std::make_shared<Linear>(6 * 1 * 2, 5);  // 13x14 -> 6x7 -> 3x4 -> 1x2
  Sequential net{conv1, bn, std::make_shared<ReLU>(), pool, conv2, std::make_shared<Tanh>(), avg,
                 std::make_shared<Flatten>(), fc};
  conv1->set_backend("onednn");
  bn->set_backend("native");
  pool->set_backend("native");
  conv2->set_backend("onednn");
  avg->set_backend("onednn");
  fc->set_backend("native");

  Tensor x = make_input({2, 3, 13, 14}, 21, DType::float32);
  Tensor wy = make_input({2, 5}, 22, DType::float64, 0.5, 1.5);
  const uint64_t before = executions();
  Tensor y32 = net(x);
  CHECK(executions() >= before + 3);  // two convolutions and the average pooling
  // Each layer's backward runs under the backend setting of its forward.
  const uint64_t before_backward = executions();
  ops::sum(y32 * wy.to(DType::float32)).backward();
  CHECK(executions() >= before_backward + 3);  // conv2 data+weights, conv1 weights, avg pool
  std::vector<Tensor> g32;
  for (const Tensor& p : net.parameters()) g32.push_back(p.grad().detach().clone());

  net.zero_grad();
  net.to(DType::float64);
  Tensor y64;
  {
    BackendGuard g("ref", true);
    net.set_backend("");
    for (auto& [n, m] : net.children()) m->set_backend("");
    y64 = net(x.to(DType::float64));
    ops::sum(y64 * wy).backward();
  }
  CHECK_CLOSE(y32, y64, 1e-4, 1e-5);
  const std::vector<Tensor> params = net.parameters();
  REQUIRE(params.size() == g32.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK_CLOSE(g32[i], params[i].grad(), 1e-3, 1e-4);
  }
}

#else  // !KILN_HAVE_ONEDNN

TEST_CASE("onednn backend") {
  kiln::test::skip_missing("oneDNN", "kiln was built without oneDNN (libdnnl-dev not found or KILN_WITH_ONEDNN=OFF)");
}

#endif
