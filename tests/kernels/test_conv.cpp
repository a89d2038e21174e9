// Convolution unit tests: the descriptor (problem strings, output sizes), hand-computed values of
// conv2d / conv_transpose2d and their gradients on both backends, the ref kernels checked as
// adjoints of each other, the native kernels against ref over the threading paths, and the
// error messages.
//   ctest --test-dir build -R kernels.test_conv
#include "tests/support/testing.h"

#include <cmath>
#include <numeric>

#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "kernels/common/conv.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;
using kiln::ops::ConvHW;

namespace {

Tensor vals(std::vector<double> v, const Shape& s, DType dt = DType::float64) { return from_vector(v, s, dt); }

std::vector<double> iota(int64_t n, double start = 1) {
  std::vector<double> v(size_t(n), 0.0);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<double> rand_vec(int64_t n, uint64_t seed) {
  return test::make_input({n}, seed).to_vector();
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

ConvDesc desc(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S, int64_t stride,
              int64_t pad, int64_t dil, int64_t groups, bool bias) {
  ConvDesc d;
  d.N = N, d.C = C, d.H = H, d.W = W, d.K = K, d.R = R, d.S = S;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.dilation_h = d.dilation_w = dil;
  d.groups = groups;
  d.has_bias = bias;
  d.set_output_size();
  return d;
}

}  // namespace

TEST_CASE("ConvDesc: problem strings and output sizes") {
  ConvDesc d = desc(2, 3, 9, 9, 4, 3, 3, 2, 1, 1, 1, true);
  CHECK(d.P == 5);
  CHECK(d.Q == 5);
  CHECK(d.problem() == "mb2ic3ih9iw9oc4oh5ow5kh3kw3sh2sw2ph1pw1dh1dw1g1");
  CHECK(d.str() == "float32 mb2ic3ih9iw9oc4oh5ow5kh3kw3sh2sw2ph1pw1dh1dw1g1");
  d.has_bias = false;
  d.dtype = DType::float64;
  CHECK(d.str() == "float64 mb2ic3ih9iw9oc4oh5ow5kh3kw3sh2sw2ph1pw1dh1dw1g1 nobias");
  CHECK(d.flops() == 2.0 * 2 * 4 * 25 * 3 * 9);

  CHECK(conv_output_size(7, 3, 1, 0, 1) == 5);
  CHECK(conv_output_size(7, 3, 2, 1, 1) == 4);
  CHECK(conv_output_size(7, 3, 3, 2, 2) == 3);  // (7 + 4 - 5) / 3 + 1
  CHECK(conv_output_size(2, 5, 1, 0, 1) == 0);  // kernel does not fit
  CHECK(conv_transpose_output_size(4, 3, 2, 1, 1, 1) == 8);
  CHECK(conv_transpose_output_size(5, 3, 1, 0, 0, 2) == 9);

  ConvDesc a = parse_conv_problem("mb16ic64ih27oc192oh27kh5ph2");
  CHECK(a.N == 16);
  CHECK(a.C == 64);
  CHECK(a.H == 27);
  CHECK(a.W == 27);
  CHECK(a.K == 192);
  CHECK(a.P == 27);
  CHECK(a.Q == 27);
  CHECK(a.R == 5);
  CHECK(a.S == 5);
  CHECK(a.pad_w == 2);
  CHECK(a.stride_w == 1);
  CHECK(a.groups == 1);
  CHECK(parse_conv_problem(d.problem(), DType::float64, false).str() == d.str());
  ConvDesc g = parse_conv_problem("g32mb8ic32ih14oc32kh3ph1");
  CHECK(g.groups == 32);
  CHECK(g.P == 14);
  ConvDesc r = parse_conv_problem("mb1ic2ih8iw6oc3kh3kw2sh2sw1");
  CHECK(r.P == 3);
  CHECK(r.Q == 5);
  CHECK_THROWS_KILN(parse_conv_problem("mb2ic3xx4oc2kh3"), "bad field 'xx4'");
  CHECK_THROWS_KILN(parse_conv_problem("mb2ic3ih4oc2"), "needs at least ic, oc, ih and kh");
  CHECK_THROWS_KILN(parse_conv_problem("mb2ic3ih4oc2kh3g2"), "inconsistent problem");
}

TEST_CASE("conv2d: hand-computed values and gradients on both backends") {
  for (const char* backend : {"ref", "native"}) {
    CAPTURE(backend);
    BackendGuard guard(backend);
    const DType dt = std::string(backend) == "ref" ? DType::float64 : DType::float32;
    // 3x3 input 1..9, 2x2 kernel [[1, 2], [3, 4]], bias 0.5.
    Tensor x = vals(iota(9), {1, 1, 3, 3}, dt).requires_grad_(true);
    Tensor w = vals({1, 2, 3, 4}, {1, 1, 2, 2}, dt).requires_grad_(true);
    Tensor b = vals({0.5}, {1}, dt).requires_grad_(true);
    Tensor y = ops::conv2d(x, w, b);
    CHECK(y.sizes() == Shape{1, 1, 2, 2});
    CHECK(y.to_vector() == std::vector<double>{37.5, 47.5, 67.5, 77.5});
    ops::sum(y).backward();
    // d/dx: how many times (and with which weight) each input is read.
    CHECK(x.grad().to_vector() == std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4});
    // d/dw[r][s]: the sum of the input window shifted by (r, s).
    CHECK(w.grad().to_vector() == std::vector<double>{12, 16, 24, 28});
    CHECK(b.grad().to_vector() == std::vector<double>{4});

    // Stride 2, padding 1, 3x3 ones: each output sums the valid part of a 3x3 window.
    Tensor ones3 = full({1, 1, 3, 3}, 1.0, dt);
    CHECK(ops::conv2d(x.detach(), ones3, Tensor(), 2, 1).to_vector() == std::vector<double>{12, 16, 24, 28});

    // Dilation 2 on a 5x5 ramp x[i][j] = 5i + j: out[p][q] = 4(5p + q) + 24.
    Tensor ramp = vals(iota(25, 0), {1, 1, 5, 5}, dt);
    Tensor yd = ops::conv2d(ramp, full({1, 1, 2, 2}, 1.0, dt), Tensor(), 1, 0, 2);
    CHECK(yd.sizes() == Shape{1, 1, 3, 3});
    CHECK(yd.to_vector() == std::vector<double>{24, 28, 32, 44, 48, 52, 64, 68, 72});

    // Non-square 1x2 kernel, stride (1, 2), padding (0, 1) on a 2x4 input.
    Tensor x24 = vals(iota(8), {1, 1, 2, 4}, dt);
    Tensor y12 = ops::conv2d(x24, vals({10, 1}, {1, 1, 1, 2}, dt), Tensor(), ConvHW(1, 2), ConvHW(0, 1));
    CHECK(y12.sizes() == Shape{1, 1, 2, 3});
    CHECK(y12.to_vector() == std::vector<double>{1, 23, 40, 5, 67, 80});

    // Groups 2 with 1x1 kernels: channel 0 doubled, channel 1 negated; bias per channel.
    Tensor x2 = vals({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}, dt);
    Tensor yg = ops::conv2d(x2, vals({2, -1}, {2, 1, 1, 1}, dt), vals({0, 1}, {2}, dt), 1, 0, 1, 2);
    CHECK(yg.to_vector() == std::vector<double>{2, 4, 6, 8, -4, -5, -6, -7});

    // Two output channels reading two input channels (groups 1): w[k][c].
    Tensor yk = ops::conv2d(x2, vals({1, 1, 1, -1}, {2, 2, 1, 1}, dt));
    CHECK(yk.to_vector() == std::vector<double>{6, 8, 10, 12, -4, -4, -4, -4});
  }
}

TEST_CASE("conv_transpose2d: hand-computed values and gradients on both backends") {
  for (const char* backend : {"ref", "native"}) {
    CAPTURE(backend);
    BackendGuard guard(backend);
    const DType dt = std::string(backend) == "ref" ? DType::float64 : DType::float32;
    Tensor x = vals({1, 2, 3, 4}, {1, 1, 2, 2}, dt).requires_grad_(true);
    Tensor w = full({1, 1, 2, 2}, 1.0, dt).requires_grad_(true);
    // Stride 1: every input pixel is spread over a 2x2 block; overlaps add up.
    CHECK(ops::conv_transpose2d(x, w).to_vector() == std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4});
    // Stride 2, output_padding 1, bias 0.5: blocks tile without overlap, plus a row and a column
    // that only the bias reaches.
    Tensor b = vals({0.5}, {1}, dt).requires_grad_(true);
    Tensor y = ops::conv_transpose2d(x, w, b, 2, 0, 1);
    CHECK(y.sizes() == Shape{1, 1, 5, 5});
    const double p = 0.5;
    CHECK(y.to_vector() == std::vector<double>{1 + p, 1 + p, 2 + p, 2 + p, p, 1 + p, 1 + p, 2 + p, 2 + p, p,
                                               3 + p, 3 + p, 4 + p, 4 + p, p, 3 + p, 3 + p, 4 + p, 4 + p, p,
                                               p,     p,     p,     p,     p});
    ops::sum(y).backward();
    CHECK(x.grad().to_vector() == std::vector<double>{4, 4, 4, 4});
    CHECK(w.grad().to_vector() == std::vector<double>{10, 10, 10, 10});
    CHECK(b.grad().to_vector() == std::vector<double>{25});
    // Padding 1 crops the border of the stride-1 result.
    CHECK(ops::conv_transpose2d(x.detach(), full({1, 1, 3, 3}, 1.0, dt), Tensor(), 1, 1).to_vector() ==
          std::vector<double>{10, 10, 10, 10});
  }
}

TEST_CASE("ref kernels are adjoints of each other") {
  // <conv(x, w), y> = <x, bwd_data(y, w)> = <w, bwd_weights(x, y)>, independent of how each loop
  // nest is written; the bias gradient is the plain sum of y per channel.
  std::vector<ConvDesc> ds = {
      desc(2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, false), desc(1, 4, 9, 8, 6, 3, 2, 2, 1, 1, 2, false),
      desc(3, 4, 10, 9, 4, 3, 3, 3, 2, 2, 4, false), desc(2, 2, 6, 5, 3, 1, 1, 1, 0, 1, 1, false),
      desc(1, 3, 11, 7, 2, 5, 5, 2, 2, 1, 1, false)};
  // Bottom/right padding other than the top/left one, as transposed convolution produces.
  ConvDesc asym = desc(2, 2, 8, 8, 3, 3, 3, 2, 1, 1, 1, false);
  asym.P = asym.Q = 3;
  ds.push_back(asym);
  asym.P = asym.Q = 5;
  ds.push_back(asym);
  for (const ConvDesc& d : ds) {
    CAPTURE(d.str());
    auto x = rand_vec(d.src_elems(), 1), w = rand_vec(d.wei_elems(), 2), y = rand_vec(d.dst_elems(), 3);
    std::vector<double> cx(size_t(d.dst_elems())), gx(size_t(d.src_elems())), gw(size_t(d.wei_elems()));
    std::vector<double> gb(size_t(d.K));
    ref::conv2d_fwd<double>(d, x.data(), w.data(), nullptr, cx.data());
    ref::conv2d_bwd_data<double>(d, y.data(), w.data(), gx.data());
    ref::conv2d_bwd_weights<double>(d, x.data(), y.data(), gw.data(), gb.data());
    const double lhs = dot(cx, y);
    CHECK(dot(x, gx) == doctest::Approx(lhs).epsilon(1e-12));
    CHECK(dot(w, gw) == doctest::Approx(lhs).epsilon(1e-12));
    const int64_t PQ = d.P * d.Q;
    for (int64_t k = 0; k < d.K; ++k) {
      double s = 0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t i = 0; i < PQ; ++i) s += y[size_t((n * d.K + k) * PQ + i)];
      CHECK(gb[size_t(k)] == doctest::Approx(s).epsilon(1e-12));
    }
  }
}

TEST_CASE("native kernels match ref on every threading path, and backward-weights is reproducible") {
  std::vector<ConvDesc> ds = {
      desc(1, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1, true),   // batch 1: parallel sgemm/im2col
      desc(4, 3, 8, 7, 6, 3, 2, 2, 1, 1, 1, true),    // batch split across threads
      desc(3, 6, 7, 7, 6, 3, 3, 1, 1, 2, 3, true),    // odd batch, groups
      desc(1, 8, 6, 5, 8, 3, 3, 1, 1, 1, 8, false),   // depthwise, batch 1: groups split
      desc(2, 16, 5, 6, 8, 1, 1, 1, 0, 1, 1, true),   // 1x1 direct path
      desc(1, 16, 5, 6, 8, 1, 1, 1, 0, 1, 2, false),  // 1x1 direct, groups, batch 1
      desc(2, 4, 9, 9, 4, 1, 1, 2, 0, 1, 1, false),   // 1x1 strided: im2col path
      desc(2, 3, 12, 10, 5, 5, 5, 3, 2, 1, 1, true),  // kernel 5, stride 3
      // Column matrices over the per-thread budget: done in chunks of output rows.
      desc(1, 16, 91, 87, 4, 3, 3, 1, 1, 1, 1, true),  // 2 chunks of 46 and 45 rows
      desc(2, 32, 150, 97, 4, 3, 3, 1, 1, 2, 2, false),
  };
  ConvDesc asym = desc(2, 3, 9, 9, 4, 3, 3, 2, 1, 1, 1, false);  // bottom padding unlike the top
  asym.P = 4;
  asym.Q = 6;
  ds.push_back(asym);
  for (const ConvDesc& d0 : ds) {
    for (bool nested : {false, true}) {
      CAPTURE(d0.str());
      CAPTURE(nested);
      ConvDesc dd = d0;
      dd.dtype = DType::float64;
      auto x = rand_vec(d0.src_elems(), 4), w = rand_vec(d0.wei_elems(), 5), b = rand_vec(d0.K, 6);
      auto gy = rand_vec(d0.dst_elems(), 7);
      std::vector<double> y(size_t(d0.dst_elems())), gx(size_t(d0.src_elems())), gw(size_t(d0.wei_elems())),
          gb(size_t(d0.K));
      ref::conv2d_fwd<double>(dd, x.data(), w.data(), b.data(), y.data());
      ref::conv2d_bwd_data<double>(dd, gy.data(), w.data(), gx.data());
      ref::conv2d_bwd_weights<double>(dd, x.data(), gy.data(), gw.data(), gb.data());

      std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end()),
          gyf(gy.begin(), gy.end());
      std::vector<float> yf(y.size()), gxf(gx.size()), gwf(gw.size()), gbf(gb.size()), gwf2(gw.size());
      auto run = [&] {
        native::conv2d_fwd(d0, xf.data(), wf.data(), bf.data(), yf.data());
        native::conv2d_bwd_data(d0, gyf.data(), wf.data(), gxf.data());
        native::conv2d_bwd_weights(d0, xf.data(), gyf.data(), gwf.data(), gbf.data());
        native::conv2d_bwd_weights(d0, xf.data(), gyf.data(), gwf2.data(), nullptr);
      };
      // Nested: called from inside a parallel region, everything must run serially and agree.
      if (nested)
        parallel_for(0, 2, 1, [&](int64_t b0, int64_t) {
          if (b0 == 0) run();
        });
      else
        run();
      // float32 rounding of a sum grows like the square root of its length; the longest sums
      // here are the weight gradients' N*P*Q terms.
      const double tol = 1e-4 * std::max(1.0, std::sqrt(double(d0.N * d0.P * d0.Q)) / 16);
      auto close = [tol](const std::vector<float>& a, const std::vector<double>& e, const std::string& what) {
        for (size_t i = 0; i < a.size(); ++i)
          if (!(std::abs(a[i] - e[i]) <= tol * (1 + std::abs(e[i])))) {
            FAIL_CHECK(what << " differs at " << i << ": " << a[i] << " vs " << e[i] << " (tol " << tol << ")");
            return;
          }
      };
      close(yf, y, "dst");
      close(gxf, gx, "diff_src");
      close(gwf, gw, "diff_wei");
      close(gbf, gb, "diff_bias");
      CHECK(gwf == gwf2);  // same bits on a second call
    }
  }
}

TEST_CASE("conv ops: half types compute in float32; float64 runs on ref under auto") {
  Tensor x = test::make_input({2, 3, 5, 5}, 1, DType::float32);
  Tensor w = test::make_input({4, 3, 3, 3}, 2, DType::float32);
  Tensor y = ops::conv2d(x, w, Tensor(), 1, 1);
  Tensor yh = ops::conv2d(x.to(DType::bfloat16), w.to(DType::bfloat16), Tensor(), 1, 1);
  CHECK(yh.dtype() == DType::bfloat16);
  CHECK_CLOSE(yh.to(DType::float32), y, 2e-2, 5e-2);
  Tensor y64 = ops::conv2d(x.to(DType::float64), w.to(DType::float64), Tensor(), 1, 1);
  CHECK(y64.dtype() == DType::float64);
  CHECK_CLOSE(y64.to(DType::float32), y, 1e-4, 1e-5);
}

TEST_CASE("conv ops: an empty batch gives empty outputs and zero weight gradients") {
  for (const char* backend : {"ref", "native"}) {
    CAPTURE(backend);
    BackendGuard guard(backend);
    Tensor x = zeros({0, 3, 5, 5}).requires_grad_(true);
    Tensor w = full({4, 3, 3, 3}, 1.0).requires_grad_(true);
    Tensor b = full({4}, 1.0).requires_grad_(true);
    Tensor y = ops::conv2d(x, w, b);
    CHECK(y.sizes() == Shape{0, 4, 3, 3});
    ops::sum(y).backward();
    CHECK(x.grad().sizes() == Shape{0, 3, 5, 5});
    CHECK(ops::sum(ops::abs(w.grad())).item() == 0);
    CHECK(b.grad().to_vector() == std::vector<double>(4, 0.0));
  }
}

TEST_CASE("conv ops: errors name the op and the shapes") {
  Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  CHECK_THROWS_KILN(ops::conv2d(x, zeros({4, 5, 3, 3})),
                    "conv2d: input [2, 3, 8, 8] has 3 channels but weight [4, 5, 3, 3] expects 5 (groups 1)");
  CHECK_THROWS_KILN(ops::conv2d(zeros({2, 4, 8, 8}), zeros({4, 1, 3, 3}), Tensor(), 1, 0, 1, 2),
                    "conv2d: input [2, 4, 8, 8] has 4 channels but weight [4, 1, 3, 3] expects 2 (groups 2)");
  CHECK_THROWS_KILN(ops::conv2d(x, zeros({4, 1, 3, 3}), Tensor(), 1, 0, 1, 2),
                    "conv2d: input [2, 3, 8, 8] has 3 channels, not divisible by groups 2");
  CHECK_THROWS_KILN(ops::conv2d(zeros({2, 4, 8, 8}), zeros({3, 2, 3, 3}), Tensor(), 1, 0, 1, 2),
                    "conv2d: weight [3, 2, 3, 3] has 3 output channels, not divisible by groups 2");
  CHECK_THROWS_KILN(ops::conv2d(x, w, Tensor(), 1, 0, 1, 0), "conv2d: groups 0 must be positive");
  CHECK_THROWS_KILN(ops::conv2d(zeros({2, 3, 4, 4}), zeros({4, 3, 5, 5})),
                    "conv2d: kernel 5x5 (dilation (1, 1), extent 5x5) is larger than the padded input 4x4 "
                    "(input [2, 3, 4, 4], weight [4, 3, 5, 5], padding (0, 0))");
  CHECK_THROWS_KILN(ops::conv2d(zeros({1, 3, 4, 4}), w, Tensor(), 1, 0, 2), "larger than the padded input 4x4");
  CHECK_THROWS_KILN(ops::conv2d(x, w, Tensor(), ConvHW(0, 1)),
                    "conv2d: stride (0, 1) must be positive (input [2, 3, 8, 8], weight [4, 3, 3, 3])");
  CHECK_THROWS_KILN(ops::conv2d(x, w, Tensor(), 1, 0, ConvHW(1, -1)), "conv2d: dilation (1, -1) must be positive");
  CHECK_THROWS_KILN(ops::conv2d(x, w, Tensor(), 1, -1), "conv2d: padding (-1, -1) must be non-negative");
  CHECK_THROWS_KILN(ops::conv2d(zeros({3, 8, 8}), w), "conv2d: input must be 4-d [N, C, H, W], got [3, 8, 8]");
  CHECK_THROWS_KILN(ops::conv2d(x, zeros({4, 3, 3})), "conv2d: weight must be 4-d, got [4, 3, 3]");
  CHECK_THROWS_KILN(ops::conv2d(x, zeros({4, 3, 3, 3}, DType::float64)),
                    "conv2d: dtype mismatch, input float32 [2, 3, 8, 8] vs weight float64 [4, 3, 3, 3]");
  CHECK_THROWS_KILN(ops::conv2d(x, w, zeros({4}, DType::float64)), "conv2d: dtype mismatch, input float32");
  CHECK_THROWS_KILN(ops::conv2d(x, w, zeros({5})),
                    "conv2d: bias [5] does not match the 4 output channels of weight [4, 3, 3, 3]");
  CHECK_THROWS_KILN(ops::conv2d(zeros({2, 3, 8, 8}, DType::int64), zeros({4, 3, 3, 3}, DType::int64)),
                    "conv2d: needs a floating-point input, got int64");
  CHECK_THROWS_KILN(ops::conv2d(x, Tensor()), "conv2d: undefined weight");

  Tensor wt = zeros({3, 2, 3, 3});  // C_in 3 -> C_out 2
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 4, 5, 5}), wt),
                    "conv_transpose2d: input [1, 4, 5, 5] has 4 channels but weight [3, 2, 3, 3] expects 3");
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 3, 5, 5}), wt, Tensor(), 1, 0, 0, 1, 2),
                    "conv_transpose2d: weight [3, 2, 3, 3] has 3 input channels, not divisible by groups 2");
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 3, 5, 5}), wt, Tensor(), 2, 0, 2),
                    "conv_transpose2d: output_padding (2, 2) must be non-negative and smaller than stride (2, 2) "
                    "or dilation (1, 1) (input [1, 3, 5, 5])");
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 3, 1, 1}), wt, Tensor(), 1, 2),
                    "conv_transpose2d: output size -1x-1 is not positive (input [1, 3, 1, 1], weight [3, 2, 3, 3]");
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 3, 5, 5}), wt, zeros({3})),
                    "conv_transpose2d: bias [3] does not match the 2 output channels of weight [3, 2, 3, 3]");
  CHECK_THROWS_KILN(ops::conv_transpose2d(zeros({1, 3, 5, 5}), wt, Tensor(), 0), "conv_transpose2d: stride (0, 0)");
}
