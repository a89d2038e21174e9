// Functional ops (engine/ops/*.h) on cuda:0 against the CPU, under both GPU backends ("cudnn"
// with fallback to kiln's kernels, and "native" strict), forward and backward, for what the
// oracle does not check (tests/oracle runs every CUDA kernel against ref in float64 where a
// device exists): how ops assemble kernels on a device (views, broadcasts, composites), the
// generator state of dropout and the random fills (bit for bit against the CPU), tensor copies
// between dtypes and devices, and the half-precision ops mixed precision runs. Harness:
// op_harness.h. Skipped without a device (tests/gpu/main.cpp).
//
// The oracle here: the CPU in float64 (the `ref` backend first), on the same values the GPU gets
// (inputs rounded to float32 first, so only the op's own arithmetic differs).
// Tolerances, with their reasons:
//  - composites: float32 accumulation in an order the kernel picks: rtol 1e-4, atol 1e-4 at these
//    shapes (K <= ~30 with values in [-1, 1]); data movement 1e-6.
//  - index outputs (argmax) exactly: the inputs there hold distinct values.
//  - dropout masks, uniform, bernoulli and normal fills: bit for bit (the same Philox counters;
//    Box-Muller in double rounded once to float, kernels/common/philox.h: the host's and CUDA's
//    libm could part only for a draw within a few double ulps of a float rounding boundary).
//   ctest --test-dir build -L gpu -R gpu_ops --output-on-failure
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "engine/ops/dropout.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/rnn.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/random.h"
#include "tests/gpu/gpu_compare.h"
#include "tests/gpu/op_harness.h"
#include "tests/support/testing.h"

using namespace kiln;
using namespace kiln::gputest;  // kGpu, kGpuBackends, to_host; OpCase, Outs, V, in, buf, distinct, run_cases

// How ops assemble the kernels on a device: views, broadcasts, transposed operands, composites
// over other ops (the oracle checks every CUDA kernel itself; tests/oracle).
TEST_CASE("gpu ops: composites and views over the kernels (matmul of views, conv_transpose2d, stack, split)") {
  std::vector<OpCase> cs;
  cs.push_back(
      {"matmul broadcast b", {in({3, 5, 7}, 44), in({7, 9}, 45)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }});
  cs.push_back({"matmul transposed views", {in({7, 5}, 46), in({3, 7}, 47)}, [](V x) {
                  return Outs{ops::matmul(x[0].t(), x[1].t())};
                }});
  cs.push_back({"sum_to", {in({3, 5, 7}, 39)}, [](V x) { return Outs{ops::sum_to(x[0], {5, 1})}; }});
  cs.push_back({"argmax dim 1", {distinct({3, 5, 7}, 33, false)}, [](V x) { return Outs{ops::argmax(x[0], 1)}; }});
  for (bool cl : {false, true}) {
    const std::string tag = cl ? " NHWC" : " NCHW";
    cs.push_back({"conv_transpose2d stride 2 output_padding 1" + tag,
                  {in({2, 4, 5, 6}, 82), in({4, 3, 3, 3}, 83), in({3}, 84)},
                  [](V x) { return Outs{ops::conv_transpose2d(x[0], x[1], x[2], 2, 1, 1)}; },
                  1e-4,
                  1e-4,
                  cl});
  }
  cs.push_back({"stack dim 1",
                {in({3, 5}, 180), in({3, 5}, 181)},
                [](V x) {
                  return Outs{ops::stack({x[0], x[1]}, 1)};
                },
                1e-6,
                1e-7});
  cs.push_back({"split + mul",
                {in({7, 4}, 182)},
                [](V x) {
                  auto p = ops::split(x[0], {2, 5}, 0);
                  return Outs{ops::mul(p[0], 2.0), ops::exp(p[1])};
                },
                1e-5,
                1e-6});
  cs.push_back({"transposed contiguous", {in({5, 7}, 183)}, [](V x) { return Outs{x[0].t().contiguous()}; }, 1e-7, 0});
  run_cases(cs);
}

namespace {

// ops::rnn over x = {input, h0, [c0,] params...} with lengths {3, 5, 1}: output, h_n[, c_n].
Outs rnn_outs(const ops::RnnOptions& o, V x) {
  const bool lstm = o.mode == RnnMode::lstm;
  const std::vector<Tensor> params(x.begin() + (lstm ? 3 : 2), x.end());
  const Tensor lengths = from_vector(std::vector<double>{3, 5, 1}, {3}, DType::int64);
  const ops::RnnOutput r = ops::rnn(x[0], x[1], lstm ? x[2] : Tensor(), params, o, lengths);
  return lstm ? Outs{r.output, r.h_n, r.c_n} : Outs{r.output, r.h_n};
}

}  // namespace

// Recurrent layers on the device: the layer-by-layer stacking, the lengths copied to the device,
// both directions and the saved state the backward reads (the kernels: tests/oracle).
TEST_CASE("gpu ops: lstm, gru and rnn layers with lengths, both directions, a projection") {
  std::vector<OpCase> cs;
  const int64_t L = 5, N = 3, I = 4, H = 6;
  for (RnnMode m : {RnnMode::lstm, RnnMode::gru, RnnMode::rnn_tanh}) {
    for (int64_t proj : {int64_t(0), int64_t(2)}) {
      if (proj && m != RnnMode::lstm) continue;
      const int64_t G = rnn_gate_count(m), Ho = proj ? proj : H;
      uint64_t seed = 300;
      std::vector<Tensor> inputs = {in({L, N, I}, seed++), in({4, N, Ho}, seed++)};
      if (m == RnnMode::lstm) inputs.push_back(in({4, N, H}, seed++));
      for (int64_t l = 0; l < 2; ++l)
        for (int d = 0; d < 2; ++d) {
          inputs.push_back(in({G * H, l == 0 ? I : 2 * Ho}, seed++, -0.5, 0.5));
          inputs.push_back(in({G * H, Ho}, seed++, -0.5, 0.5));
          inputs.push_back(in({G * H}, seed++));
          inputs.push_back(in({G * H}, seed++));
          if (proj) inputs.push_back(in({proj, H}, seed++));
        }
      cs.push_back({std::string(rnn_mode_name(m)) + (proj ? " proj" : "") + " 2 layers bidirectional lengths", inputs,
                    [m, proj](V x) {
                      ops::RnnOptions o;
                      o.mode = m;
                      o.num_layers = 2;
                      o.bidirectional = true;
                      o.proj_size = proj;
                      return rnn_outs(o, x);
                    }});
    }
  }
  run_cases(cs);

  // float16 layers: cuDNN runs them in float16 (half data, weights, states and gradients, float32
  // math); native (strict) has no half recurrent kernel, so the call runs on float32 copies. Both
  // against the CPU in float64 on the same float16 values. Forward-in-time layers only: cuDNN
  // takes no reverse layer, and one would send the whole call through float32. Tolerance: the
  // states are rounded to float16 (4.9e-4 relative) every step, 5 steps and 2 layers, and the
  // gradients are float16 sums of T * N terms: rtol/atol 2e-2 (the oracle's cuDNN float16 row for
  // rnn_bwd, tests/oracle/tolerances.cpp).
  std::vector<OpCase> half;
  for (RnnMode m : {RnnMode::lstm, RnnMode::gru, RnnMode::rnn_tanh}) {
    const int64_t G = rnn_gate_count(m);
    uint64_t seed = 400;
    std::vector<Tensor> inputs = {in({L, N, I}, seed++), in({2, N, H}, seed++)};
    if (m == RnnMode::lstm) inputs.push_back(in({2, N, H}, seed++));
    for (int64_t l = 0; l < 2; ++l) {
      inputs.push_back(in({G * H, l == 0 ? I : H}, seed++, -0.5, 0.5));
      inputs.push_back(in({G * H, H}, seed++, -0.5, 0.5));
      inputs.push_back(in({G * H}, seed++));
      inputs.push_back(in({G * H}, seed++));
    }
    half.push_back({std::string(rnn_mode_name(m)) + " float16 2 layers lengths", inputs,
                    [m](V x) {
                      ops::RnnOptions o;
                      o.mode = m;
                      o.num_layers = 2;
                      return rnn_outs(o, x);
                    },
                    2e-2,
                    2e-2});
  }
  run_cases(half, DType::float16);
#if defined(KILN_HAVE_CUDNN) && !defined(KILN_EMU_DEVICE) && !defined(KILN_GPUTEST_ON_CPU)
  {  // and cuDNN did take the float16 layers (no silent float32 route)
    BackendGuard g("cudnn");
    RnnDesc d;
    d.dtype = DType::float16;
    d.T = L, d.N = N, d.I = I, d.H = H;
    d.has_lengths = true;
    for (RnnMode m : {RnnMode::lstm, RnnMode::gru, RnnMode::rnn_tanh}) {
      d.mode = m;
      const auto* fwd = find_kernel<kernel_op::rnn_fwd>(DeviceType::cuda, d);
      const auto* bwd = find_kernel<kernel_op::rnn_bwd>(DeviceType::cuda, d);
      CHECK_MESSAGE((fwd && backend_name(fwd->backend) == "cudnn"), d.str());
      CHECK_MESSAGE((bwd && backend_name(bwd->backend) == "cudnn"), d.str());
    }
  }
#endif
}

TEST_CASE("gpu ops: dropout draws the same mask as the CPU for the same generator state") {
  Tensor x = test::make_input({4, 33, 7}, 190, DType::float32, 0.5, 1.5);
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    Generator gc(1234), gg(1234);
    Tensor xc = x.clone().requires_grad_(true), yc;
    {
      BackendGuard cpu("auto");
      yc = ops::dropout(xc, p, true, &gc);
      ops::sum(yc).backward();
    }
    for (const auto& b : kGpuBackends) {
      const std::string backend = b.name;
      CAPTURE(backend);
      try {
        BackendGuard g(b.name, b.strict);
        gg.set_state(1234, 0);
        Tensor xg = x.clone().to(kGpu).requires_grad_(true);
        Tensor yg = ops::dropout(xg, p, true, &gg);
        ops::sum(yg).backward();
        CHECK(gg.offset() == gc.offset());
        // Bit for bit: the same Philox counters, and x * (1 / (1 - p)) in float32 on both sides.
        CHECK(to_host(yg).to_vector() == yc.to_vector());
        CHECK(to_host(xg.grad()).to_vector() == xc.grad().to_vector());
        // Eval mode and p = 0 are the identity.
        CHECK(to_host(ops::dropout(x.to(kGpu), p, false, &gg)).to_vector() == x.to_vector());
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: " << std::string(e.what())); }
    }
  }
}

TEST_CASE("gpu ops: random fills match the CPU bit for bit (uniform, bernoulli, normal; float32 and float64)") {
  for (int64_t n : {1, 7, 33, 1001}) {
    CAPTURE(n);
    for (const auto& b : kGpuBackends) {
      const std::string backend = b.name;
      CAPTURE(backend);
      try {
        BackendGuard g(b.name, b.strict);
        Generator gc(77), gg(77);
        Tensor c = empty({n}), d = empty({n}, kGpu);
        Tensor c64 = empty({n}, TensorOptions(DType::float64));
        Tensor d64 = empty({n}, TensorOptions(DType::float64).with_device(kGpu));
        std::vector<double> cu, cb, cn, cu64, cn64;
        {
          BackendGuard cpu("auto");  // the CPU draws with any CPU kernel
          cu = uniform_(c, -2, 3, &gc).to_vector();
          cb = bernoulli_(c, 0.3, &gc).to_vector();
          cn = normal_(c, 0.5, 2, &gc).to_vector();
          cu64 = uniform_(c64, 0, 1, &gc).to_vector();
          cn64 = normal_(c64, -1, 0.25, &gc).to_vector();
        }
        CHECK(to_host(uniform_(d, -2, 3, &gg)).to_vector() == cu);
        CHECK(to_host(bernoulli_(d, 0.3, &gg)).to_vector() == cb);
        CHECK_CLOSE(to_host(normal_(d, 0.5, 2, &gg)), from_vector(cn, {n}), 0, 0);  // tolerance 0: names the worst
        CHECK(to_host(uniform_(d64, 0, 1, &gg)).to_vector() == cu64);  // float64 draws on the device too
        CHECK_CLOSE(to_host(normal_(d64, -1, 0.25, &gg)), from_vector(cn64, {n}, DType::float64), 0, 0);
        CHECK(gg.offset() == gc.offset());
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: " << std::string(e.what())); }
    }
  }
}

TEST_CASE("gpu ops: copies between dtypes and fill_ agree with the CPU bit for bit") {
  const DType dts[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16,
                       DType::int32,   DType::int64,   DType::uint8};
  // Integers 0..200 (exact in every dtype here) and fractions (rounded by the float conversions,
  // round-to-nearest-even on both sides).
  std::vector<double> ints(201), fracs(257);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = double(i);
  for (size_t i = 0; i < fracs.size(); ++i) fracs[i] = (double(i) - 128) / 7.0 + 1e-3;
  // The CPU's results first, under any CPU kernel.
  std::vector<std::vector<double>> want_copy, want_strided, want_fill, want_fill_view;
  {
    BackendGuard cpu("auto");
    for (DType from : dts)
      for (DType to : dts) {
        const bool floats = is_floating(from) && is_floating(to);
        Tensor h = from_vector(floats ? fracs : ints, {floats ? int64_t(fracs.size()) : int64_t(ints.size())},
                               TensorOptions(from));
        want_copy.push_back(h.to(to).to_vector());
        Tensor m = h.slice(0, 0, 200).view({10, 20});
        want_strided.push_back(m.t().to(to).contiguous().to_vector());
      }
    for (DType dt : dts) {
      Tensor c = empty({3, 37}, TensorOptions(dt));
      want_fill.push_back(c.fill_(is_floating(dt) ? 2.5 : 7.0).to_vector());
      Tensor e = zeros({6, 5}, TensorOptions(dt));
      e.slice(1, 1, 4).fill_(3);
      want_fill_view.push_back(e.to_vector());
    }
  }
  for (const auto& b : kGpuBackends) {
    const std::string backend = b.name;
    CAPTURE(backend);
    BackendGuard g(b.name, b.strict);
    size_t k = 0;
    for (DType from : dts)
      for (DType to : dts) {
        CAPTURE(from);
        CAPTURE(to);
        const bool floats = is_floating(from) && is_floating(to);
        Tensor h = from_vector(floats ? fracs : ints, {floats ? int64_t(fracs.size()) : int64_t(ints.size())},
                               TensorOptions(from));
        const size_t at = k++;
        try {
          CHECK(to_host(h.to(kGpu).to(to)).to_vector() == want_copy[at]);
          // A strided source converted on the device.
          Tensor m = h.slice(0, 0, 200).view({10, 20});
          CHECK(to_host(m.to(kGpu).t().to(to).contiguous()).to_vector() == want_strided[at]);
        } catch (const Error& e) { FAIL_CHECK("threw on cuda: " << std::string(e.what())); }
      }
    for (size_t i = 0; i < std::size(dts); ++i) {
      const DType dt = dts[i];
      CAPTURE(dt);
      try {
        Tensor d = empty({3, 37}, TensorOptions(dt).with_device(kGpu));
        d.fill_(is_floating(dt) ? 2.5 : 7.0);
        CHECK(to_host(d).to_vector() == want_fill[i]);
        d.zero_();
        CHECK(to_host(d).to_vector() == std::vector<double>(3 * 37, 0.0));
        // fill_ of a strided view touches only the view.
        Tensor e = zeros({6, 5}, TensorOptions(dt).with_device(kGpu));
        e.slice(1, 1, 4).fill_(3);
        CHECK(to_host(e).to_vector() == want_fill_view[i]);
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: " << std::string(e.what())); }
    }
  }
}

TEST_CASE("gpu ops: float16 and bfloat16 (the ops mixed precision runs in half)") {
  // Inputs and output weights on the half grid (both sides see the same numbers); the GPU stores
  // every result in half (float16: 11 mantissa bits, 4.9e-4 relative per rounding; bfloat16: 8
  // bits, 3.9e-3) and composite ops round intermediates too: rtol/atol 1e-2 (float16) and 4e-2
  // (bfloat16), on values of order 1.
  for (DType dt : {DType::float16, DType::bfloat16}) {
    const double tol = dt == DType::float16 ? 1e-2 : 4e-2;
    std::vector<OpCase> cs;
    cs.push_back({"relu", {in({3, 5, 7}, 500)}, [](V x) { return Outs{ops::relu(x[0])}; }, tol, tol});
    cs.push_back({"sigmoid", {in({3, 5, 7}, 501)}, [](V x) { return Outs{ops::sigmoid(x[0])}; }, tol, tol});
    cs.push_back({"add broadcast",
                  {in({3, 5, 7}, 502), in({7}, 503)},
                  [](V x) { return Outs{ops::add(x[0], x[1])}; },
                  tol,
                  tol});
    cs.push_back({"mul", {in({33}, 504), in({33}, 505)}, [](V x) { return Outs{ops::mul(x[0], x[1])}; }, tol, tol});
    cs.push_back({"sum dim 1", {in({3, 5, 7}, 506)}, [](V x) { return Outs{ops::sum(x[0], {1})}; }, tol, tol});
    cs.push_back(
        {"matmul", {in({5, 7}, 507), in({7, 3}, 508)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }, tol, tol});
    for (bool cl : {false, true}) {
      const std::string tag = cl ? " NHWC" : " NCHW";
      cs.push_back({"conv 3x3 bias" + tag,
                    {in({2, 3, 7, 9}, 509), in({5, 3, 3, 3}, 510), in({5}, 511)},
                    [](V x) { return Outs{ops::conv2d(x[0], x[1], x[2], 1, 1)}; },
                    tol,
                    tol,
                    cl});
      // Mixed precision's batch norm: half x, float32 parameters and statistics.
      cs.push_back({"batch_norm train" + tag,
                    {in({3, 5, 4, 7}, 512), in({5}, 513), in({5}, 514), buf({5}, 515), buf({5}, 516, 0.5, 1.5)},
                    [](V x) {
                      return Outs{ops::batch_norm(x[0], x[1], x[2], x[3], x[4], true), x[3], x[4]};
                    },
                    tol,
                    tol,
                    cl,
                    1});
      cs.push_back({"max_pool2d 3 s2 p1" + tag,
                    {distinct({2, 3, 9, 11}, 517)},
                    [](V x) {
                      return Outs{ops::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})};
                    },
                    tol,
                    tol,
                    cl});
      cs.push_back({"avg_pool2d 2" + tag,
                    {in({2, 3, 8, 7}, 518)},
                    [](V x) {
                      return Outs{ops::avg_pool2d(x[0], {2, 2})};
                    },
                    tol,
                    tol,
                    cl});
      cs.push_back({"adaptive_avg_pool2d 1x1" + tag,
                    {in({2, 5, 7, 7}, 519)},
                    [](V x) {
                      return Outs{ops::adaptive_avg_pool2d(x[0], {1, 1})};
                    },
                    tol,
                    tol,
                    cl});
    }
    cs.push_back({"softmax", {in({5, 33}, 520, -4, 4)}, [](V x) { return Outs{ops::softmax(x[0], -1)}; }, tol, tol});
    cs.push_back(
        {"log_softmax", {in({5, 33}, 521, -4, 4)}, [](V x) { return Outs{ops::log_softmax(x[0], -1)}; }, tol, tol});
    cs.push_back({"cat",
                  {in({2, 3, 5}, 522), in({2, 1, 5}, 523)},
                  [](V x) {
                    return Outs{ops::cat({x[0], x[1]}, 1)};
                  },
                  tol,
                  tol});
    cs.push_back({"upsample_nearest2d",
                  {in({2, 3, 4, 5}, 524)},
                  [](V x) { return Outs{ops::upsample_nearest2d(x[0], 2.0, 2.0)}; },
                  tol,
                  tol});
    cs.push_back({"add_n",
                  {in({3, 5, 7}, 525), in({3, 5, 7}, 526)},
                  [](V x) {
                    return Outs{ops::add_n({x[0], x[1]})};
                  },
                  tol,
                  tol});
    run_cases(cs, dt);
  }
}
