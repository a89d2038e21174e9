// bfloat16 on CPUs that have it (AVX512_BF16 / AMX through oneDNN): convolution and batch norm
// run in bfloat16 without float32 copies, elementwise ops compute bfloat16 in place, and a
// mixed-precision net (float32 master weights, bfloat16 activations) stays within bfloat16's
// rounding of the float32 one, forward and backward. Where oneDNN has no bfloat16 kernels the
// same calls run through float32 copies, and the tests check the values the same way.
//   ctest --test-dir build -R test_bfloat16
#include "tests/support/testing.h"

#include <cmath>

#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/random.h"
#include "kernels/common/conv.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"


using namespace kiln;

namespace {

// ||a - b|| / ||b|| over all elements, in double.
double rel_l2(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

bool onednn_bf16_conv() {
  ConvDesc d;
  d.dtype = DType::bfloat16;
  d.N = 2, d.C = 16, d.H = d.W = 8, d.K = 16, d.R = d.S = 3, d.pad_h = d.pad_w = 1;
  d.set_output_size();
  d.nhwc = true;
  auto& t = op_table<kernel_op::conv2d_fwd>();
  const auto* impl = t.find(DeviceType::cpu, d);
  return impl && backend_name(impl->backend) == "onednn";
}

}  // namespace

TEST_CASE("bfloat16 elementwise ops compute in place and round once") {
  Tensor a = test::make_input({3, 5, 7}, 1, DType::float32), b = test::make_input({3, 5, 7}, 2, DType::float32);
  Tensor ab = a.to(DType::bfloat16), bb = b.to(DType::bfloat16);
  Tensor y = ops::relu(ab + bb);
  CHECK(y.dtype() == DType::bfloat16);
  // One rounding of the float32 result of the bfloat16 inputs.
  Tensor expect = ops::relu(ab.to(DType::float32) + bb.to(DType::float32)).to(DType::bfloat16);
  CHECK(y.to_vector() == expect.to_vector());
}

TEST_CASE("bfloat16 convolution: oneDNN kernels where the CPU has them, within bfloat16 rounding") {
  const std::string have = onednn_bf16_conv() ? "yes" : "no (float32 copies)";
  MESSAGE("oneDNN bfloat16 convolution: " << have);
  Tensor x = test::make_input({4, 16, 10, 10}, 3, DType::float32).contiguous(MemoryFormat::channels_last);
  Tensor w = test::make_input({32, 16, 3, 3}, 4, DType::float32) * 0.2;
  Tensor b = test::make_input({32}, 5, DType::float32);
  // The float32 reference on the same (bfloat16-rounded) values.
  Tensor xr = x.to(DType::bfloat16), wr = w.to(DType::bfloat16), br = b.to(DType::bfloat16);
  Tensor y32 = ops::conv2d(xr.to(DType::float32), wr.to(DType::float32), br.to(DType::float32), 1, 1);
  Tensor xg = xr.detach().requires_grad_(true), wg = wr.detach().requires_grad_(true), bg = br.detach().requires_grad_(true);
  Tensor y = ops::conv2d(xg, wg, bg, 1, 1);
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
  CHECK(rel_l2(y, y32) < 8e-3);  // one bfloat16 rounding of the output: 2^-9 relative
  Tensor gy = test::make_input(y.sizes(), 6, DType::float32);
  y.backward(gy.to(DType::bfloat16));
  Tensor x32 = xr.to(DType::float32).detach().requires_grad_(true), w32 = wr.to(DType::float32).detach().requires_grad_(true);
  ops::conv2d(x32, w32, br.to(DType::float32), 1, 1).backward(gy.to(DType::bfloat16).to(DType::float32));
  CHECK(xg.grad().dtype() == DType::bfloat16);
  CHECK(rel_l2(xg.grad(), x32.grad()) < 8e-3);
  CHECK(rel_l2(wg.grad(), w32.grad()) < 8e-3);
}

TEST_CASE("mixed precision: a conv/BN/pool/linear net in bfloat16 tracks float32, forward and backward") {
  manual_seed(7);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{
      make<Conv2d>(3, 16, 3, 1, 1), make<BatchNorm2d>(16), make<ReLU>(), make<MaxPool2d>(2),
      make<Conv2d>(16, 32, 3, 1, 1), make<BatchNorm2d>(32), make<ReLU>(), make<AdaptiveAvgPool2d>(1),
      make<Flatten>(), make<Linear>(32, 10)});
  Tensor x = test::make_input({8, 3, 16, 16}, 8, DType::float32).contiguous(MemoryFormat::channels_last);
  auto grads = [&](const Tensor& in, Tensor& out) {
    net->zero_grad();
    out = (*net)(in);
    ops::sum(ops::square(out.to(DType::float32))).backward();
    std::vector<Tensor> g;
    for (const auto& [name, p] : net->named_parameters()) g.push_back(p.grad());
    return g;
  };
  net->eval();  // running statistics fixed: both passes see the same normalisation
  Tensor y32, y16;
  auto g32 = grads(x, y32);
  auto g16 = grads(x.to(DType::bfloat16), y16);
  CHECK(y16.dtype() == DType::bfloat16);
  CHECK(rel_l2(y16, y32) < 3e-2);
  auto names = net->named_parameters();
  for (size_t i = 0; i < g32.size(); ++i) {
    CAPTURE(names[i].first);
    CHECK(g16[i].dtype() == DType::float32);  // the masters' gradients stay float32
    CHECK(rel_l2(g16[i], g32[i]) < 5e-2);
  }
}
