// Batch norm folded into the convolution in an imported ONNX graph: a net of Conv+BN+ReLU and a
// ResNet Bottleneck (with non-trivial statistics), exported by kiln and imported again, runs its
// Conv -> BatchNormalization (-> Relu) chains as folded convolutions (the ReLU a post-op) in eval
// with no gradient wanted, with
// the outputs of the unfolded graph and of the original net; training mode, gradients and
// KILN_FUSE off leave them unfolded; load_state_dict into the imported net is followed.
//   ctest --test-dir build -R onnx.test_onnx_fold
#include "tests/support/testing.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/random.h"
#include "io/onnx/onnx.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/norm.h"
#include "layers/pool.h"
#include "nets/convnets.h"

using namespace kiln;

namespace {

ModulePtr make_net(uint64_t seed) {
  manual_seed(seed);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{
      make<Conv2d>(3, 8, 3, 1, 1, 1, 1, false), make<BatchNorm2d>(8), make<ReLU>(), make<nets::Bottleneck>(8, 2),
      make<Conv2d>(8, 6, 3, 2, 1), make<BatchNorm2d>(6)});
  NoGradGuard ng;
  Generator gen(seed + 1);
  for (auto& [n, t] : net->named_parameters())
    if (t.dim() == 1) uniform_(t, -1, 1, &gen);
  for (auto& [n, t] : net->named_buffers()) {
    if (n.find("running_var") != std::string::npos) uniform_(t, 0.5, 2, &gen);
    if (n.find("running_mean") != std::string::npos) uniform_(t, -1, 1, &gen);
  }
  net->eval();
  return net;
}

Tensor run(Module& m, const Tensor& x, bool fuse) {
  Sequential::set_fusion(fuse);
  NoGradGuard ng;
  Tensor y = m(x);
  Sequential::set_fusion(true);
  return y;
}

double tol(const Tensor& y) { return 2e-5 * std::max(1.0, ops::amax(ops::abs(y)).item()); }

}  // namespace

TEST_CASE("onnx import: Conv -> BatchNormalization pairs run folded in eval, with the unfolded outputs") {
  ModulePtr net = make_net(5);
  const onnx::Model model = onnx::export_module(*net, {2, 3, 10, 9});
  ModulePtr imported = onnx::import_model(model);
  // Every conv of this net is read by a batch norm only: 2 + the Bottleneck's 3; a Relu alone reads
  // the stem's and the Bottleneck's first two.
  CHECK(imported->repr().find("5 batch norms foldable into their convs (3 with the ReLU after)") != std::string::npos);
  imported->eval();
  const Tensor x = test::make_input({2, 3, 10, 9}, 6, DType::float32).contiguous(MemoryFormat::channels_last);
  const Tensor want = run(*net, x, false);
  const Tensor unfolded = run(*imported, x, false), folded = run(*imported, x, true);
  CHECK_CLOSE(unfolded, want, 0, tol(want));
  CHECK_CLOSE(folded, unfolded, 0, tol(want));
  CHECK_CLOSE(run(*imported, x, true), folded, 0, 0);  // cached folds: the same bits

  SUBCASE("training mode and gradients run the pairs unfolded") {
    imported->train();
    CHECK_CLOSE(run(*imported, x, true), unfolded, 0, tol(want));
    imported->eval();
    Tensor y = (*imported)(x);  // gradients wanted
    ops::sum(y).backward();
    for (const auto& entry : imported->named_parameters()) {
      const std::string& n = entry.first;
      const Tensor& p = entry.second;
      CAPTURE(n);
      if (n.find("running_") == std::string::npos && n.find("num_batches") == std::string::npos)
        CHECK(p.grad().defined());
    }
  }
  SUBCASE("load_state_dict into the imported net is followed") {
    ModulePtr other = make_net(9);
    ModulePtr other_imported = onnx::import_model(onnx::export_module(*other, {2, 3, 10, 9}));
    imported->load_state_dict(other_imported->state_dict());
    const Tensor want2 = run(*other, x, false);
    CHECK_CLOSE(run(*imported, x, true), want2, 0, tol(want2));
  }
}

// Conv -> Relu (no batch norm) runs as one convolution with the ReLU as its post-op, and pooling
// keeps a channels-last network channels-last (an NCHW MaxPool output once made every later
// convolution of an imported GoogLeNet reorder: 0.75 of the zoo net's speed).
TEST_CASE("onnx import: Conv -> Relu fused, channels-last kept through pooling") {
  manual_seed(5);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{
      make<Conv2d>(3, 8, 3, 1, 1), make<ReLU>(), make<MaxPool2d>(3, 2, 1), make<Conv2d>(8, 4, 3, 1, 1), make<ReLU>(),
      make<AvgPool2d>(2)});
  net->eval();
  ModulePtr imported = onnx::import_model(onnx::export_module(*net, {2, 3, 12, 12}));
  imported->eval();
  CHECK(imported->repr().find("2 Conv -> Relu fused") != std::string::npos);
  const Tensor x = randn({2, 3, 12, 12}).contiguous(MemoryFormat::channels_last);
  const Tensor want = run(*net, x, false);
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    const Tensor y = run(*imported, x, fuse);
    CHECK_CLOSE(y, want, 0, tol(want));
    CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
  }
  // A gradient through the fused step is the unfused one's.
  Tensor xg = x.detach().clone().requires_grad_();
  ops::sum((*imported)(xg)).backward();
  Tensor xr = x.detach().clone().requires_grad_();
  ops::sum((*net)(xr)).backward();
  CHECK_CLOSE(xg.grad(), xr.grad(), 0, 1e-5);
}
