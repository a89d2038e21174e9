// Every functional op of engine/ops/*.h on cuda:0 against the CPU, under both GPU backends
// ("cudnn" with fallback to kiln's kernels, and "native" strict: kiln's own CUDA kernels only),
// forward and backward: outputs and the gradients of every input that requires one, with a
// table of {name, inputs, fn} cases on small odd shapes (the harness: op_harness.h), in float32
// and, for the ops mixed precision uses, float16/bfloat16. Also dropout's mask and the random
// fills bit for bit against the CPU for the same generator state, copies between dtypes, fill,
// the optimizer steps and clip_grad_norm. Skipped without a device (tests/gpu/main.cpp).
// The harness self-check without a GPU: compile with -DKILN_GPUTEST_ON_CPU (gpu_compare.h).
//
// The oracle: the CPU in float64 (the `ref` backend first), on the same values the GPU gets
// (inputs rounded to float32 first, so only the op's own arithmetic differs). The GPU runs float32.
// Tolerances, with their reasons:
//  - pointwise ops: one float32 rounding of a float64-exact result, and CUDA's libm (exp, log, tanh,
//    erf) within 2-4 ulps: rtol 1e-5, atol 1e-6.
//  - reductions, matmul, conv, norms, losses: float32 accumulation in an order the kernel picks
//    (tree reductions, cuDNN's algorithms: Winograd/FFT transform the operands first): the
//    error grows with the reduction length K like sqrt(K) eps |terms|: rtol 1e-4, atol 1e-4 at
//    these shapes (K <= ~300 with values in [-1, 1]).
//  - index outputs (argmax, pooling indices) exactly: the inputs there hold distinct values.
//  - dropout masks, uniform and bernoulli fills: bit for bit (the same Philox counters); normal
//    fills: Box-Muller's log/sqrt/cos in CUDA's libm: rtol 1e-6, atol 1e-6 (a few ulps).
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
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/optim.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "tests/gpu/gpu_compare.h"
#include "tests/gpu/op_harness.h"
#include "tests/support/testing.h"

using namespace kiln;
using namespace kiln::gputest;  // kGpu, kGpuBackends, to_host; OpCase, Outs, V, in, buf, distinct, labels, run_cases

TEST_CASE("gpu ops: elementwise unary, binary with broadcasting, scalars, comparisons") {
  std::vector<OpCase> cs;
  const double pr = 1e-5, pa = 1e-6;  // pointwise tolerances (see the header)
  using U = Tensor (*)(const Tensor&);
  const std::pair<const char*, U> any[] = {{"neg", ops::neg},       {"abs", ops::abs},   {"exp", ops::exp},
                                           {"square", ops::square}, {"relu", ops::relu}, {"sigmoid", ops::sigmoid},
                                           {"tanh", ops::tanh},     {"gelu", ops::gelu}};
  for (auto& [name, f] : any) cs.push_back({name, {in({3, 5, 7}, 1)}, [f = f](V x) { return Outs{f(x[0])}; }, pr, pa});
  const std::pair<const char*, U> positive[] = {
      {"log", ops::log}, {"sqrt", ops::sqrt}, {"rsqrt", ops::rsqrt}, {"reciprocal", ops::reciprocal}};
  for (auto& [name, f] : positive)
    cs.push_back({name, {in({33}, 2, 0.25, 2)}, [f = f](V x) { return Outs{f(x[0])}; }, pr, pa});
  cs.push_back({"leaky_relu 0.2", {in({4, 9}, 3)}, [](V x) { return Outs{ops::leaky_relu(x[0], 0.2)}; }, pr, pa});
  cs.push_back({"clamp_min", {in({4, 9}, 4)}, [](V x) { return Outs{ops::clamp_min(x[0], 0.1)}; }, pr, pa});
  cs.push_back({"add scalar", {in({255}, 5)}, [](V x) { return Outs{ops::add(x[0], 0.75)}; }, pr, pa});
  cs.push_back({"mul scalar", {in({255}, 6)}, [](V x) { return Outs{ops::mul(x[0], -1.5)}; }, pr, pa});
  cs.push_back({"pow scalar", {in({7, 3}, 7, 0.25, 2)}, [](V x) { return Outs{ops::pow(x[0], 2.5)}; }, pr, pa});
  using B = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, B> bin[] = {
      {"add", ops::add}, {"sub", ops::sub}, {"mul", ops::mul}, {"maximum", ops::maximum}, {"minimum", ops::minimum}};
  // Same shape, row broadcast, both sides broadcast, a scalar tensor.
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 5, 7}, {3, 5, 7}}, {{3, 5, 7}, {7}}, {{3, 1, 7}, {5, 1}}, {{2, 9}, {}}};
  for (auto& [name, f] : bin)
    for (auto& [sa, sb] : shapes)
      cs.push_back({std::string(name) + " " + shape_str(sa) + " " + shape_str(sb),
                    {in(sa, 8), in(sb, 9)},
                    [f = f](V x) { return Outs{f(x[0], x[1])}; },
                    pr,
                    pa});
  // div and pow: b away from zero, pow's base positive (its exponent is differentiated too).
  cs.push_back({"div broadcast",
                {in({3, 5, 7}, 10), in({5, 1}, 11, 0.5, 2)},
                [](V x) { return Outs{ops::div(x[0], x[1])}; },
                pr,
                pa});
  cs.push_back({"pow tensor",
                {in({3, 1, 7}, 12, 0.5, 2), in({5, 1}, 13)},
                [](V x) { return Outs{ops::pow(x[0], x[1])}; },
                pr,
                pa});
  // Comparisons of small integers (exact everywhere) so that equal pairs occur; 0/1 outputs exactly.
  using C = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, C> cmp[] = {{"eq", ops::eq}, {"ne", ops::ne}, {"gt", ops::gt},
                                           {"ge", ops::ge}, {"lt", ops::lt}, {"le", ops::le}};
  for (auto& [name, f] : cmp)
    cs.push_back({name,
                  {labels({5, 6}, 4, 1).to(DType::float64), labels({6}, 4, 3).to(DType::float64)},
                  [f = f](V x) { return Outs{f(x[0], x[1])}; },
                  0,
                  0});
  run_cases(cs);
}

TEST_CASE("gpu ops: reductions, max/min with indices, argmax/argmin") {
  std::vector<OpCase> cs;
  cs.push_back({"sum all", {in({3, 5, 7}, 20)}, [](V x) { return Outs{ops::sum(x[0])}; }});
  cs.push_back({"sum dim 1", {in({3, 5, 7}, 21)}, [](V x) { return Outs{ops::sum(x[0], {1})}; }});
  cs.push_back({"sum dims 0,2 keepdim", {in({3, 5, 7}, 22)}, [](V x) { return Outs{ops::sum(x[0], {0, 2}, true)}; }});
  cs.push_back({"sum 1000", {in({1000}, 23)}, [](V x) { return Outs{ops::sum(x[0])}; }});
  cs.push_back({"mean dim -1", {in({3, 5, 7}, 24)}, [](V x) { return Outs{ops::mean(x[0], {-1})}; }});
  cs.push_back({"mean all", {in({9, 11}, 25)}, [](V x) { return Outs{ops::mean(x[0])}; }});
  for (int64_t dim : {0, 1, 2}) {
    cs.push_back({"max dim " + std::to_string(dim), {distinct({3, 5, 7}, 26 + dim)}, [dim](V x) {
                    auto r = ops::max(x[0], dim);
                    return Outs{r.values, r.indices};
                  }});
    cs.push_back({"min dim keepdim " + std::to_string(dim), {distinct({3, 5, 7}, 29 + dim)}, [dim](V x) {
                    auto r = ops::min(x[0], dim, true);
                    return Outs{r.values, r.indices};
                  }});
    cs.push_back({"argmax dim " + std::to_string(dim), {distinct({3, 5, 7}, 32 + dim, false)}, [dim](V x) {
                    return Outs{ops::argmax(x[0], dim)};
                  }});
    cs.push_back({"argmin dim " + std::to_string(dim), {distinct({3, 5, 7}, 35 + dim, false)}, [dim](V x) {
                    return Outs{ops::argmin(x[0], dim)};
                  }});
  }
  cs.push_back({"amax", {distinct({4, 33}, 38)}, [](V x) { return Outs{ops::amax(x[0])}; }});
  cs.push_back({"sum_to", {in({3, 5, 7}, 39)}, [](V x) { return Outs{ops::sum_to(x[0], {5, 1})}; }});
  run_cases(cs);
}

TEST_CASE("gpu ops: matmul and linear") {
  std::vector<OpCase> cs;
  cs.push_back({"matmul 2d", {in({5, 7}, 40), in({7, 3}, 41)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }});
  cs.push_back(
      {"matmul batched", {in({2, 5, 7}, 42), in({2, 7, 3}, 43)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }});
  cs.push_back(
      {"matmul broadcast b", {in({3, 5, 7}, 44), in({7, 9}, 45)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }});
  cs.push_back({"matmul transposed views", {in({7, 5}, 46), in({3, 7}, 47)}, [](V x) {
                  return Outs{ops::matmul(x[0].t(), x[1].t())};
                }});
  cs.push_back(
      {"matmul 33x65x17", {in({33, 65}, 48), in({65, 17}, 49)}, [](V x) { return Outs{ops::matmul(x[0], x[1])}; }});
  cs.push_back({"linear bias", {in({6, 11}, 50), in({5, 11}, 51), in({5}, 52)}, [](V x) {
                  return Outs{ops::linear(x[0], x[1], x[2])};
                }});
  cs.push_back(
      {"linear no bias 3-d", {in({2, 3, 11}, 53), in({5, 11}, 54)}, [](V x) { return Outs{ops::linear(x[0], x[1])}; }});
  run_cases(cs);
}

TEST_CASE("gpu ops: conv2d (NCHW and channels-last, groups, stride, dilation, bias, fused relu), conv_transpose2d") {
  std::vector<OpCase> cs;
  for (bool cl : {false, true}) {
    const std::string tag = cl ? " NHWC" : " NCHW";
    cs.push_back({"conv 3x3 pad 1 bias" + tag,
                  {in({2, 3, 7, 9}, 60), in({5, 3, 3, 3}, 61), in({5}, 62)},
                  [](V x) { return Outs{ops::conv2d(x[0], x[1], x[2], 1, 1)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv stride 2 pad (1,2) dilation 2" + tag,
                  {in({1, 4, 11, 8}, 63), in({6, 4, 3, 2}, 64)},
                  [](V x) {
                    return Outs{ops::conv2d(x[0], x[1], Tensor(), 2, {1, 2}, 2)};
                  },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv groups 2 stride (2,1)" + tag,
                  {in({2, 4, 7, 7}, 65), in({6, 2, 3, 3}, 66), in({6}, 67)},
                  [](V x) {
                    return Outs{ops::conv2d(x[0], x[1], x[2], {2, 1}, 1, 1, 2)};
                  },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv depthwise" + tag,
                  {in({2, 6, 9, 7}, 68), in({6, 1, 3, 3}, 69), in({6}, 70)},
                  [](V x) { return Outs{ops::conv2d(x[0], x[1], x[2], 1, 1, 1, 6)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv 1x1" + tag,
                  {in({3, 8, 5, 5}, 71), in({7, 8, 1, 1}, 72), in({7}, 73)},
                  [](V x) { return Outs{ops::conv2d(x[0], x[1], x[2])}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv 5x5 stride 2 pad 2" + tag,
                  {in({2, 3, 13, 11}, 74), in({4, 3, 5, 5}, 75), in({4}, 76)},
                  [](V x) { return Outs{ops::conv2d(x[0], x[1], x[2], 2, 2)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv2d_relu" + tag,
                  {in({2, 3, 7, 9}, 77), in({5, 3, 3, 3}, 78), in({5}, 79)},
                  [](V x) { return Outs{ops::conv2d_relu(x[0], x[1], x[2], 1, 1)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv2d_relu groups 3 no bias" + tag,
                  {in({1, 6, 8, 7}, 80), in({9, 2, 3, 3}, 81)},
                  [](V x) { return Outs{ops::conv2d_relu(x[0], x[1], Tensor(), 1, 0, 1, 3)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"conv_transpose2d stride 2 output_padding 1" + tag,
                  {in({2, 4, 5, 6}, 82), in({4, 3, 3, 3}, 83), in({3}, 84)},
                  [](V x) { return Outs{ops::conv_transpose2d(x[0], x[1], x[2], 2, 1, 1)}; },
                  1e-4,
                  1e-4,
                  cl});
  }
  run_cases(cs);
}

TEST_CASE("gpu ops: batch norm (train/eval, NHWC), batch_norm_relu, softmax, log_softmax") {
  std::vector<OpCase> cs;
  for (bool cl : {false, true}) {
    const std::string tag = cl ? " NHWC" : " NCHW";
    // Outputs: y and the running statistics the op updates in place.
    cs.push_back({"batch_norm train" + tag,
                  {in({3, 5, 4, 7}, 90), in({5}, 91), in({5}, 92), buf({5}, 93), buf({5}, 94, 0.5, 1.5)},
                  [](V x) {
                    return Outs{ops::batch_norm(x[0], x[1], x[2], x[3], x[4], true, 0.1, 1e-5), x[3], x[4]};
                  },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"batch_norm eval" + tag,
                  {in({3, 5, 4, 7}, 95), in({5}, 96), in({5}, 97), buf({5}, 98), buf({5}, 99, 0.5, 1.5)},
                  [](V x) { return Outs{ops::batch_norm(x[0], x[1], x[2], x[3], x[4], false)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"batch_norm_relu train" + tag,
                  {in({2, 6, 5, 3}, 100), in({6}, 101), in({6}, 102), buf({6}, 103), buf({6}, 104, 0.5, 1.5)},
                  [](V x) {
                    return Outs{ops::batch_norm_relu(x[0], x[1], x[2], x[3], x[4], true), x[3], x[4]};
                  },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"batch_norm_relu eval" + tag,
                  {in({2, 6, 5, 3}, 105), in({6}, 106), in({6}, 107), buf({6}, 108), buf({6}, 109, 0.5, 1.5)},
                  [](V x) { return Outs{ops::batch_norm_relu(x[0], x[1], x[2], x[3], x[4], false)}; },
                  1e-4,
                  1e-4,
                  cl});
    cs.push_back({"softmax dim 1 4-d" + tag,
                  {in({2, 7, 3, 5}, 110, -3, 3)},
                  [](V x) { return Outs{ops::softmax(x[0], 1)}; },
                  1e-4,
                  1e-5,
                  cl});
    cs.push_back({"log_softmax dim 1 4-d" + tag,
                  {in({2, 7, 3, 5}, 111, -3, 3)},
                  [](V x) { return Outs{ops::log_softmax(x[0], 1)}; },
                  1e-4,
                  1e-5,
                  cl});
  }
  cs.push_back({"batch_norm 2-d no affine train",
                {in({9, 5}, 112), Tensor(), Tensor(), buf({5}, 113), buf({5}, 114, 0.5, 1.5)},
                [](V x) {
                  return Outs{ops::batch_norm(x[0], x[1], x[2], x[3], x[4], true), x[3], x[4]};
                }});
  cs.push_back(
      {"softmax dim -1", {in({5, 33}, 115, -4, 4)}, [](V x) { return Outs{ops::softmax(x[0], -1)}; }, 1e-4, 1e-5});
  cs.push_back(
      {"softmax dim 0", {in({6, 9}, 116, -4, 4)}, [](V x) { return Outs{ops::softmax(x[0], 0)}; }, 1e-4, 1e-5});
  cs.push_back({"log_softmax 1000 classes",
                {in({3, 1000}, 117, -8, 8)},
                [](V x) { return Outs{ops::log_softmax(x[0], -1)}; },
                1e-4,
                1e-4});
  run_cases(cs);
}

TEST_CASE("gpu ops: max/avg/adaptive pooling, LRN") {
  std::vector<OpCase> cs;
  for (bool cl : {false, true}) {
    const std::string tag = cl ? " NHWC" : " NCHW";
    cs.push_back({"max_pool2d 3 s2 p1 with indices" + tag,
                  {distinct({2, 3, 9, 11}, 120)},
                  [](V x) {
                    auto r = ops::max_pool2d_with_indices(x[0], {3, 3}, {2, 2}, {1, 1});
                    return Outs{r.values, r.indices};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"max_pool2d 2 ceil" + tag,
                  {distinct({2, 3, 7, 9}, 121)},
                  [](V x) {
                    return Outs{ops::max_pool2d(x[0], {2, 2}, {2, 2}, {0, 0}, {1, 1}, true)};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"max_pool2d dilation 2" + tag,
                  {distinct({1, 2, 11, 10}, 122)},
                  [](V x) {
                    return Outs{ops::max_pool2d(x[0], {3, 2}, {1, 2}, {1, 1}, {2, 2})};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"avg_pool2d 3 s2 p1" + tag,
                  {in({2, 3, 9, 11}, 123)},
                  [](V x) {
                    return Outs{ops::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"avg_pool2d exclude pad ceil" + tag,
                  {in({2, 3, 8, 7}, 124)},
                  [](V x) {
                    return Outs{ops::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true, false)};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"avg_pool2d divisor 5" + tag,
                  {in({1, 4, 6, 6}, 125)},
                  [](V x) {
                    return Outs{ops::avg_pool2d(x[0], {2, 3}, {2, 2}, {0, 1}, false, true, 5)};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"adaptive_avg_pool2d 3x4" + tag,
                  {in({2, 3, 7, 9}, 126)},
                  [](V x) {
                    return Outs{ops::adaptive_avg_pool2d(x[0], {3, 4})};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"adaptive_avg_pool2d 1x1" + tag,
                  {in({2, 5, 7, 7}, 127)},
                  [](V x) {
                    return Outs{ops::adaptive_avg_pool2d(x[0], {1, 1})};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"adaptive_max_pool2d 3x4 with indices" + tag,
                  {distinct({2, 3, 7, 9}, 128)},
                  [](V x) {
                    auto r = ops::adaptive_max_pool2d_with_indices(x[0], {3, 4});
                    return Outs{r.values, r.indices};
                  },
                  1e-5,
                  1e-6,
                  cl});
    cs.push_back({"local_response_norm 5" + tag,
                  {in({2, 7, 4, 5}, 129)},
                  [](V x) { return Outs{ops::local_response_norm(x[0], 5, 1e-2, 0.75, 2.0)}; },
                  1e-4,
                  1e-5,
                  cl});
  }
  cs.push_back({"local_response_norm 3 on 3-d",
                {in({6, 5, 4}, 130)},
                [](V x) { return Outs{ops::local_response_norm(x[0], 3)}; },
                1e-4,
                1e-5});
  run_cases(cs);
}

TEST_CASE("gpu ops: pad, upsample, cat, add_n, stack, split") {
  std::vector<OpCase> cs;
  const std::pair<const char*, PadMode> modes[] = {{"constant", PadMode::constant},
                                                   {"reflect", PadMode::reflect},
                                                   {"replicate", PadMode::replicate},
                                                   {"circular", PadMode::circular}};
  for (auto& [name, m] : modes) {
    cs.push_back({std::string("pad 2-d ") + name,
                  {in({2, 3, 5, 6}, 160)},
                  [m = m](V x) {
                    return Outs{ops::pad(x[0], {1, 2, 2, 1}, m, 0.5)};
                  },
                  1e-6,
                  1e-7});
    cs.push_back({std::string("pad 1-d ") + name,
                  {in({3, 7}, 161)},
                  [m = m](V x) {
                    return Outs{ops::pad(x[0], {3, 1}, m)};
                  },
                  1e-6,
                  1e-7});
  }
  cs.push_back({"pad negative crop",
                {in({2, 3, 5, 6}, 162)},
                [](V x) {
                  return Outs{ops::pad(x[0], {-1, 2, 1, -2})};
                },
                1e-6,
                1e-7});
  cs.push_back({"upsample_nearest2d size",
                {in({2, 3, 4, 5}, 163)},
                [](V x) {
                  return Outs{ops::upsample_nearest2d(x[0], {7, 11})};
                },
                1e-6,
                1e-7});
  cs.push_back({"upsample_nearest2d scale 2",
                {in({2, 3, 4, 5}, 164)},
                [](V x) { return Outs{ops::upsample_nearest2d(x[0], 2.0, 2.0)}; },
                1e-6,
                1e-7});
  cs.push_back({"upsample_bilinear2d size",
                {in({2, 3, 4, 5}, 165)},
                [](V x) {
                  return Outs{ops::upsample_bilinear2d(x[0], {7, 9})};
                },
                1e-5,
                1e-6});
  cs.push_back({"upsample_bilinear2d align_corners",
                {in({2, 3, 4, 5}, 166)},
                [](V x) {
                  return Outs{ops::upsample_bilinear2d(x[0], {9, 7}, true)};
                },
                1e-5,
                1e-6});
  cs.push_back({"upsample_bilinear2d scale 1.5",
                {in({1, 2, 6, 5}, 167)},
                [](V x) { return Outs{ops::upsample_bilinear2d(x[0], 1.5, 1.5)}; },
                1e-5,
                1e-6});
  cs.push_back({"cat dim 1",
                {in({2, 3, 5}, 168), in({2, 1, 5}, 169), in({2, 4, 5}, 170)},
                [](V x) {
                  return Outs{ops::cat({x[0], x[1], x[2]}, 1)};
                },
                1e-6,
                1e-7});
  cs.push_back({"cat dim 0 NCHW",
                {in({1, 3, 4, 5}, 171), in({2, 3, 4, 5}, 172)},
                [](V x) {
                  return Outs{ops::cat({x[0], x[1]}, 0)};
                },
                1e-6,
                1e-7});
  cs.push_back({"cat dim -1",
                {in({3, 7}, 173), in({3, 2}, 174)},
                [](V x) {
                  return Outs{ops::cat({x[0], x[1]}, -1)};
                },
                1e-6,
                1e-7});
  cs.push_back({"add_n 3",
                {in({3, 5, 7}, 175), in({3, 5, 7}, 176), in({3, 5, 7}, 177)},
                [](V x) {
                  return Outs{ops::add_n({x[0], x[1], x[2]})};
                },
                1e-6,
                1e-6});
  cs.push_back({"add_n 1000 x 2",
                {in({1000}, 178), in({1000}, 179)},
                [](V x) {
                  return Outs{ops::add_n({x[0], x[1]})};
                },
                1e-6,
                1e-6});
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
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: ", e.what()); }
    }
  }
}

TEST_CASE("gpu ops: random fills match the CPU (uniform, bernoulli bit for bit; normal within a few ulps)") {
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
        std::vector<double> cu, cb, cn, cu64;
        {
          BackendGuard cpu("auto");  // the CPU draws with any CPU kernel
          cu = uniform_(c, -2, 3, &gc).to_vector();
          cb = bernoulli_(c, 0.3, &gc).to_vector();
          cn = normal_(c, 0.5, 2, &gc).to_vector();
          cu64 = uniform_(c64, 0, 1, &gc).to_vector();
        }
        CHECK(to_host(uniform_(d, -2, 3, &gg)).to_vector() == cu);
        CHECK(to_host(bernoulli_(d, 0.3, &gg)).to_vector() == cb);
        Tensor dn = to_host(normal_(d, 0.5, 2, &gg));
        CHECK_CLOSE(dn, from_vector(cn, {n}), 1e-6, 1e-6);
        CHECK(to_host(uniform_(d64, 0, 1, &gg)).to_vector() == cu64);  // float64 draws on the device too
        CHECK(gg.offset() == gc.offset());
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: ", e.what()); }
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
        } catch (const Error& e) { FAIL_CHECK("threw on cuda: ", e.what()); }
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
      } catch (const Error& e) { FAIL_CHECK("threw on cuda: ", e.what()); }
    }
  }
}

namespace {
// Three steps of an optimizer on float64 CPU parameters (the oracle) and float32 GPU ones, with
// the same gradients; parameters and state compared after each step.
void check_optimizer(const std::string& label,
                     const std::function<std::unique_ptr<optim::Optimizer>(NamedTensors)>& make) {
  CAPTURE(label);
  const Shape shapes[] = {{5, 3, 3, 3}, {5}, {7, 11}};
  NamedTensors cpu, gpu;
  for (size_t i = 0; i < 3; ++i) {
    Tensor p = test::make_input(shapes[i], 200 + i, DType::float32).to(DType::float64);
    cpu.push_back({"p" + std::to_string(i), p.clone().requires_grad_(true)});
    gpu.push_back({"p" + std::to_string(i), p.to(DType::float32).to(kGpu).requires_grad_(true)});
  }
  std::unique_ptr<optim::Optimizer> oc, og;
  {
    BackendGuard g("ref", false);
    oc = make(cpu);
  }
  og = make(gpu);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < 3; ++i) {
      Tensor gr = test::make_input(shapes[i], 300 + 10 * step + i, DType::float32).to(DType::float64);
      cpu[i].second.set_grad(gr);
      gpu[i].second.set_grad(gr.to(DType::float32).to(kGpu));
    }
    {
      BackendGuard g("ref", false);
      oc->step();
    }
    og->step();
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(cpu[i].first);
      CHECK(gpu[i].second.device() == kGpu);
      // float32 parameters against float64: each update rounds once to float32 (and Adam's
      // sqrt/divide): rtol 1e-5, atol 1e-6 after three steps.
      CHECK_CLOSE(to_host(gpu[i].second), cpu[i].second, 1e-5, 1e-6);
    }
    NamedTensors sc = oc->state_tensors(), sg = og->state_tensors();
    CHECK(sc.size() == sg.size());
    for (size_t i = 0; i < std::min(sc.size(), sg.size()); ++i) {
      CAPTURE(sc[i].first);
      CHECK(sg[i].first == sc[i].first);
      CHECK_CLOSE(to_host(sg[i].second), sc[i].second, 1e-5, 1e-6);
    }
  }
}
}  // namespace

TEST_CASE("gpu ops: optimizer steps (SGD momentum/Nesterov, Adam, AdamW, LARS) and clip_grad_norm") {
  for (const auto& b : kGpuBackends) {
    const std::string backend = b.name;
    CAPTURE(backend);
    BackendGuard g(b.name, b.strict);
    auto guarded = [&](const std::string& label, std::function<std::unique_ptr<optim::Optimizer>(NamedTensors)> make) {
      try {
        check_optimizer(label, make);
      } catch (const Error& e) { FAIL_CHECK(label, " threw on cuda: ", e.what()); }
    };
    guarded("sgd", [](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0, 0, 0, false}); });
    guarded("sgd momentum wd", [](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0.9, 0.1, 1e-2, false}); });
    guarded("sgd nesterov", [](NamedTensors p) { return optim::sgd(std::move(p), {0.05, 0.9, 0, 1e-3, true}); });
    guarded("adam", [](NamedTensors p) { return optim::adam(std::move(p), {1e-2, 0.9, 0.999, 1e-8, 1e-2}); });
    guarded("adamw", [](NamedTensors p) { return optim::adamw(std::move(p), {1e-2, 0.8, 0.99, 1e-6, 0.05}); });
    guarded("lars", [](NamedTensors p) { return optim::lars(std::move(p), {0.5, 0.9, 1e-4, 0.01, 1e-9, true}); });

    try {
      // clip_grad_norm: the norm (double accumulation of float32 squares on both sides) and
      // the scaled gradients.
      NamedTensors cpu, gpu;
      for (int i = 0; i < 3; ++i) {
        Tensor p = test::make_input({7 + i, 5}, 400 + i, DType::float32);
        Tensor gr = test::make_input({7 + i, 5}, 410 + i, DType::float32, -3, 3);
        cpu.push_back({"p" + std::to_string(i), p.clone().requires_grad_(true)});
        gpu.push_back({"p" + std::to_string(i), p.clone().to(kGpu).requires_grad_(true)});
        cpu.back().second.set_grad(gr);
        gpu.back().second.set_grad(gr.clone().to(kGpu));  // clone: a buffer of its own
      }
      double nc = 0;
      {
        BackendGuard any("auto");
        nc = optim::clip_grad_norm(cpu, 1.0);
      }
      const double ng = optim::clip_grad_norm(gpu, 1.0);
      CHECK(ng == doctest::Approx(nc).epsilon(1e-9));
      for (int i = 0; i < 3; ++i) CHECK_CLOSE(to_host(gpu[i].second.grad()), cpu[i].second.grad(), 1e-6, 1e-7);
      // sum_squares and scale_ directly.
      Tensor x = test::make_input({1001}, 420, DType::float32);
      Tensor xc = x.clone();
      double ssc = 0;
      {
        BackendGuard any("auto");
        ssc = ops::sum_squares(x);
        ops::scale_(xc, 0.37);
      }
      CHECK(ops::sum_squares(x.clone().to(kGpu)) == doctest::Approx(ssc).epsilon(1e-9));
      Tensor xd = x.clone().to(kGpu);
      ops::scale_(xd, 0.37);
      CHECK_CLOSE(to_host(xd), xc, 2.5e-7, 0);  // x * s rounded once; the scalar may be float or double: 2 ulps
    } catch (const Error& e) { FAIL_CHECK("clip_grad_norm threw on cuda: ", e.what()); }
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

// Last in the file: cross_entropy / nll_loss validate the class indices on the host
// (engine/ops/loss.cpp plan_class), which for a CUDA target would read device memory; should that
// crash the process, every other case of this file has run already.
TEST_CASE("gpu ops: losses (cross_entropy, nll, bce_with_logits, mse)") {
  std::vector<OpCase> cs;
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string tag = r == Reduction::mean ? " mean" : r == Reduction::sum ? " sum" : " none";
    cs.push_back({"cross_entropy" + tag, {in({5, 7}, 140, -3, 3), labels({5}, 7, 1)}, [r](V x) {
                    return Outs{ops::cross_entropy(x[0], x[1], r)};
                  }});
    cs.push_back({"nll_loss" + tag, {in({5, 7}, 141, -3, 0), labels({5}, 7, 2)}, [r](V x) {
                    return Outs{ops::nll_loss(x[0], x[1], r)};
                  }});
    cs.push_back({"bce_with_logits" + tag, {in({4, 6}, 142, -4, 4), in({4, 6}, 143, 0, 1)}, [r](V x) {
                    return Outs{ops::binary_cross_entropy_with_logits(x[0], x[1], r)};
                  }});
    cs.push_back({"mse_loss" + tag, {in({3, 5, 7}, 144), in({3, 5, 7}, 145)}, [r](V x) {
                    return Outs{ops::mse_loss(x[0], x[1], r)};
                  }});
  }
  // Label smoothing and ignore_index (-100 in one place), spatial targets.
  Tensor t = from_vector(std::vector<double>{0, 6, -100, 3, 2, 5}, {6}, TensorOptions(DType::int64));
  cs.push_back({"cross_entropy smoothing 0.1 ignore_index", {in({6, 7}, 146, -3, 3), t}, [](V x) {
                  return Outs{ops::cross_entropy(x[0], x[1], Reduction::mean, 0.1)};
                }});
  cs.push_back({"cross_entropy spatial [2,3,4,5]", {in({2, 3, 4, 5}, 147, -3, 3), labels({2, 4, 5}, 3, 4)}, [](V x) {
                  return Outs{ops::cross_entropy(x[0], x[1], Reduction::none)};
                }});
  cs.push_back({"cross_entropy 1000 classes", {in({3, 1000}, 148, -5, 5), labels({3}, 1000, 5)}, [](V x) {
                  return Outs{ops::cross_entropy(x[0], x[1])};
                }});
  cs.push_back({"nll_loss ignore_index", {in({6, 7}, 149, -3, 0), t}, [](V x) {
                  return Outs{ops::nll_loss(x[0], x[1], Reduction::mean)};
                }});
  cs.push_back({"bce_with_logits pos_weight",
                {in({4, 6}, 150, -4, 4), in({4, 6}, 151, 0, 1), buf({6}, 152, 0.5, 3)},
                [](V x) { return Outs{ops::binary_cross_entropy_with_logits(x[0], x[1], Reduction::mean, x[2])}; }});
  run_cases(cs);
}
