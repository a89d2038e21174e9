// Conv2d + ReLU fusion in Sequential: the pair runs as one convolution with a ReLU post-op on
// every CPU backend, with the same values and gradients as the two layers run apart, in NCHW and
// channels-last; the ReLU keeps its place in the tree and the per-layer profile.
//   ctest --test-dir build -R test_fusion
#include "tests/support/testing.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/conv.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/random.h"
#include "kernels/common/conv.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/module.h"
#include "layers/norm.h"

using namespace kiln;

TEST_CASE("Sequential fuses Conv2d+ReLU with the same values and gradients") {
  std::vector<std::string> backends = {"ref", "native"};
  if (op_table<kernel_op::conv2d_fwd>().has("onednn", DeviceType::cpu))
    backends.push_back("onednn");
  for (const std::string& be : backends) {
    for (bool cl : {false, true}) {
      CAPTURE(be);
      CAPTURE(cl);
      const DType t = be == "ref" ? DType::float64 : DType::float32;
      manual_seed(3);
      auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(3, 8, 3, 1, 1), make<ReLU>(),
                                                                   make<Conv2d>(8, 4, 1), make<ReLU>()});
      net->to(t);
      Tensor x = test::make_input({2, 3, 9, 9}, 4, t);
      if (cl) x = x.contiguous(MemoryFormat::channels_last);
      BackendGuard g(be);
      auto run = [&](bool fuse, std::vector<Tensor>& grads) {
        Sequential::set_fusion(fuse);
        net->zero_grad();
        Tensor y = (*net)(x);
        CHECK(y.grad_fn()->name() == (fuse ? "Conv2dReluBackward" : "ReluBackward"));
        ops::sum(ops::square(y)).backward();
        grads.clear();
        for (const auto& [n, p] : net->named_parameters()) grads.push_back(p.grad());
        return y;
      };
      std::vector<Tensor> g0, g1;
      Tensor y0 = run(false, g0), y1 = run(true, g1);
      const double tol = t == DType::float64 ? 1e-12 : 1e-5;
      CHECK_CLOSE(y1, y0, tol, tol);
      for (size_t i = 0; i < g0.size(); ++i) CHECK_CLOSE(g1[i], g0[i], tol, tol);
      Sequential::set_fusion(true);
    }
  }
  CHECK(Sequential::fusion());
}

TEST_CASE("BatchNorm2d+ReLU fusion: same values, gradients and running statistics, train and eval") {
  for (const std::string be : {"ref", "native"}) {
    for (bool cl : {false, true}) {
      for (bool training : {true, false}) {
        CAPTURE(be);
        CAPTURE(cl);
        CAPTURE(training);
        const DType t = be == "ref" ? DType::float64 : DType::float32;
        std::vector<Tensor> out, grads, stats;
        for (bool fuse : {false, true}) {
          manual_seed(5);
          auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(3, 6, 3, 1, 1),
                                                                       make<BatchNorm2d>(6), make<ReLU>()});
          net->to(t);
          net->train(training);
          Tensor x = test::make_input({4, 3, 7, 7}, 6, t);
          if (cl) x = x.contiguous(MemoryFormat::channels_last);
          BackendGuard g(be);
          Sequential::set_fusion(fuse);
          Tensor y = (*net)(x);
          CHECK(y.grad_fn()->name() == (fuse ? "BatchNormReluBackward" : "ReluBackward"));
          ops::sum(ops::square(y)).backward();
          out.push_back(y);
          for (const auto& [n, p] : net->named_parameters()) grads.push_back(p.grad());
          for (const auto& [n, b] : net->named_buffers()) stats.push_back(b);
        }
        Sequential::set_fusion(true);
        const double tol = t == DType::float64 ? 1e-12 : 1e-5;
        CHECK_CLOSE(out[1], out[0], tol, tol);
        const size_t ng = grads.size() / 2, ns = stats.size() / 2;
        for (size_t i = 0; i < ng; ++i) CHECK_CLOSE(grads[ng + i], grads[i], tol, tol);
        for (size_t i = 0; i < ns; ++i) CHECK_CLOSE(stats[ns + i], stats[i], tol, tol);
      }
    }
  }
}

TEST_CASE("the fused ops check their arguments like the unfused ones, naming themselves") {
  Tensor x = test::make_input({2, 3, 5, 5}, 1, DType::float32);
  CHECK_THROWS_KILN(ops::conv2d_relu(x, test::make_input({4, 2, 3, 3}, 2, DType::float32)),
                    "conv2d_relu: input [2, 3, 5, 5] has 3 channels but weight [4, 2, 3, 3] expects 2");
  CHECK_THROWS_KILN(ops::batch_norm_relu(x, ones({4}), zeros({4}), Tensor(), Tensor(), true),
                    "batch_norm: weight [4] does not match the 3 channels of input [2, 3, 5, 5]");
}
