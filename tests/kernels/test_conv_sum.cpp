// The residual post-op of the convolution (ConvDesc::sum, ops::conv2d_sum): every CPU backend
// against a float64 reference (conv2d, add and ReLU on ref) over odd shapes, strides, groups,
// NCHW and channels-last, with and without bias and ReLU; the fused kernel runs where a backend
// takes the descriptor (ref, oneDNN, native on channels-last float32 without groups) and the op
// falls back to separate ops where none does (native NCHW or grouped); the residual is never
// written. The kernels alone are
// checked against ref in float64 by the oracle (tests/oracle/problems_conv.cpp).
//   ctest --test-dir build -R kernels.test_conv_sum
#include "tests/support/testing.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "kernels/common/conv.h"

using namespace kiln;
using kiln::ops::ConvHW;

namespace {

struct Problem {
  Shape x, w;
  ConvHW stride, pad;
  int64_t groups;
};

const Problem kProblems[] = {
    {{2, 3, 9, 11}, {5, 3, 3, 3}, 1, 1, 1},    // odd sizes, same padding
    {{1, 4, 7, 7}, {6, 4, 1, 1}, 1, 0, 1},     // batch 1, 1x1 (ResNet's conv3)
    {{2, 4, 10, 9}, {6, 4, 3, 3}, 2, 1, 1},    // stride 2
    {{2, 6, 9, 9}, {6, 2, 3, 3}, 1, 1, 3},     // groups
    {{1, 16, 5, 5}, {16, 16, 3, 3}, 1, 1, 1},  // oneDNN's blocked kernels
};

std::vector<std::string> cpu_backends() {
  std::vector<std::string> v = {"ref", "native"};
  if (op_table<kernel_op::conv2d_fwd>().has("onednn", DeviceType::cpu)) v.push_back("onednn");
  return v;
}

// Whether backend `be` itself takes the fused descriptor (strict: no fallback to ref).
bool fused_on(const std::string& be, bool nhwc, bool relu) {
  ConvDesc d = parse_conv_problem("mb2ic16ih9oc16kh3ph1");
  d.nhwc = nhwc;
  d.relu = relu;
  d.sum = true;
  BackendGuard g(be, true);
  const auto* c = op_table<kernel_op::conv2d_fwd>().find(DeviceType::cpu, d);
  return c != nullptr;
}

}  // namespace

TEST_CASE("conv2d_sum equals conv2d + residual (+ ReLU) on every CPU backend, NCHW and channels-last") {
  for (const std::string& be : cpu_backends())
    for (const Problem& p : kProblems)
      for (bool cl : {false, true})
        for (bool bias : {true, false})
          for (bool relu : {true, false}) {
            CAPTURE(be);
            CAPTURE(shape_str(p.x));
            CAPTURE(cl);
            CAPTURE(bias);
            CAPTURE(relu);
            const DType t = be == "ref" ? DType::float64 : DType::float32;
            Tensor x = test::make_input(p.x, 1), w = test::make_input(p.w, 2, DType::float64, -0.5, 0.5);
            Tensor b = bias ? test::make_input({p.w[0]}, 3) : Tensor();
            Tensor y64;
            {
              BackendGuard g("ref");
              y64 = ops::conv2d(x, w, b, p.stride, p.pad, 1, p.groups);
            }
            Tensor r = test::make_input(y64.sizes(), 4);
            Tensor want;
            {
              BackendGuard g("ref");
              want = ops::add(y64, r);
              if (relu) want = ops::relu(want);
            }
            Tensor xt = x.to(t), rt = r.to(t);
            if (cl) {
              xt = xt.contiguous(MemoryFormat::channels_last);
              rt = rt.contiguous(MemoryFormat::channels_last);
            }
            const Tensor r_before = rt.clone();
            xt.requires_grad_(true);  // so the output names the node that made it
            Tensor got;
            {
              BackendGuard g(be);
              got = ops::conv2d_sum(xt, w.to(t), bias ? b.to(t) : Tensor(), rt, p.stride, p.pad, 1, p.groups, relu);
            }
            const double tol = t == DType::float64 ? 1e-12 : 1e-5;
            CHECK_CLOSE(got, want, tol, tol);
            CHECK_CLOSE(rt, r_before, 0, 0);  // read, never written
            const std::string fused = relu ? "Conv2dSumReluBackward" : "Conv2dSumBackward";
            // ref and oneDNN run it fused, native on channels-last (grouped channels-last has no
            // native kernel at all and runs on ref, fused); native NCHW runs its convolution
            // alone, then the add and ReLU.
            if (be != "native" || cl)
              CHECK(got.grad_fn()->name() == fused);
            else
              CHECK(got.grad_fn()->name() != fused);
          }
}

TEST_CASE("the residual post-op: ref and oneDNN take it, native on channels-last (NCHW: the op falls back)") {
  CHECK(fused_on("ref", false, true));
  CHECK(fused_on("ref", true, false));
  // kernels/cpu/native reads the residual on its channels-last paths (direct and GEMM) only.
  CHECK_FALSE(fused_on("native", false, true));
  CHECK(fused_on("native", true, true));
  CHECK(fused_on("native", true, false));
  if (op_table<kernel_op::conv2d_fwd>().has("onednn", DeviceType::cpu)) {
    CHECK(fused_on("onednn", false, true));
    CHECK(fused_on("onednn", true, true));
    CHECK(fused_on("onednn", true, false));
  }
  // Preferring native (not strictly) the op must not hand the fused NCHW descriptor to ref's
  // loops: it runs native's convolution, then the add and ReLU.
  {
    BackendGuard g("native");
    Tensor x = test::make_input({2, 3, 6, 6}, 1, DType::float32).requires_grad_(true);
    Tensor w = test::make_input({4, 3, 3, 3}, 2, DType::float32);
    Tensor y = ops::conv2d_sum(x, w, Tensor(), zeros({2, 4, 4, 4}));
    CHECK(y.grad_fn()->name() != "Conv2dSumReluBackward");
  }
  ConvDesc d = parse_conv_problem("mb2ic3ih5oc4kh3");
  d.sum = true;
  d.relu = true;
  CHECK(d.str() == "float32 mb2ic3ih5iw5oc4oh3ow3kh3kw3sh1sw1ph0pw0dh1dw1g1 sum relu");
}

TEST_CASE("conv2d_sum checks the residual, naming itself") {
  Tensor x = test::make_input({2, 3, 5, 5}, 1, DType::float32), w = test::make_input({4, 3, 3, 3}, 2, DType::float32);
  CHECK_THROWS_KILN(ops::conv2d_sum(x, w, Tensor(), zeros({2, 4, 5, 5})),
                    "conv2d_sum: residual [2, 4, 5, 5] does not match the output [2, 4, 3, 3]");
  CHECK_THROWS_KILN(ops::conv2d_sum(x, w, Tensor(), zeros({2, 4, 3, 3}, DType::float64)),
                    "conv2d_sum: residual is float64 on cpu, input float32 on cpu");
  CHECK_THROWS_KILN(ops::conv2d_sum(x, w, Tensor(), Tensor()), "conv2d_sum: undefined residual");
}
