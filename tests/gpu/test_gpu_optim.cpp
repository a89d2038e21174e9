// Optimizers on a real CUDA device: steps over a zoo net's parameters (resnet56: ~170 tensors from
// 16 to 36,864 elements) on cuda:0 against the same steps on the CPU, parameters AND state within
// float32 tolerance (nvcc contracts a*b+c into FMAs, and the sums of squares add in another order,
// so the last bits may differ), for SGD with momentum, Nesterov, Adam, AdamW and LARS, with an
// undefined gradient on one step; each group (device, dtype, update key) is ONE multi-tensor call
// (one kernel launch), counted by ops::optim_update_calls(); clip_grad_norm agrees too.
//   ctest --test-dir build -L gpu   (Skipped without a GPU)
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "engine/cuda_runtime.h"
#include "engine/ops/optim.h"
#include "engine/optim.h"
#include "nets/zoo.h"
#include "tests/support/testing.h"

using namespace kiln;

namespace {

const Device kGpu("cuda:0");

NamedTensors zoo_params() {
  ModulePtr net = nets::build("resnet56");
  NamedTensors ps;
  for (auto& [n, p] : net->named_parameters()) ps.emplace_back(n, p.detach().clone().requires_grad_());
  return ps;
}

NamedTensors on(const NamedTensors& ps, Device dev) {
  NamedTensors out;
  for (auto& [n, p] : ps) out.emplace_back(n, p.detach().clone().to(dev).requires_grad_());
  return out;
}

// Gradients of step t, the same values on both devices; the third parameter has none at t == 1.
void set_grads(const NamedTensors& cpu, const NamedTensors& gpu, int t) {
  for (size_t i = 0; i < cpu.size(); ++i) {
    Tensor pc = cpu[i].second, pg = gpu[i].second;
    if (i == 2 && t == 1) {
      pc.set_grad(Tensor());
      pg.set_grad(Tensor());
      continue;
    }
    Tensor g = test::make_input(pc.sizes(), uint64_t(100 + 1000 * t + int(i)), DType::float32, -0.1, 0.1);
    pc.set_grad(g);
    pg.set_grad(g.clone().to(kGpu));  // its own copy: clipping scales in place
  }
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(NamedTensors)>;

// Steps both; returns the update calls of each GPU step.
std::vector<int64_t> compare(const MakeOpt& make, double rtol, double atol, bool clip = false) {
  const NamedTensors base = zoo_params();
  NamedTensors pc = on(base, Device()), pg = on(base, kGpu);
  auto oc = make(pc), og = make(pg);
  REQUIRE(og->multi_tensor());
  std::vector<int64_t> calls;
  for (int t = 0; t < 3; ++t) {
    CAPTURE(t);
    set_grads(pc, pg, t);
    if (clip) {
      const double nc = optim::clip_grad_norm(pc, 1.0), ng = optim::clip_grad_norm(pg, 1.0);
      CHECK(std::abs(nc - ng) <= 1e-9 * nc);
    }
    oc->step();
    const int64_t c0 = ops::optim_update_calls();
    og->step();
    calls.push_back(ops::optim_update_calls() - c0);
  }
  for (size_t i = 0; i < pc.size(); ++i) {
    CAPTURE(pc[i].first);
    CHECK_CLOSE(pg[i].second.to(Device()), pc[i].second, rtol, atol);
  }
  CHECK(og->state_json() == oc->state_json());
  const NamedTensors sc = oc->state_tensors(), sg = og->state_tensors();
  REQUIRE(sc.size() == sg.size());
  for (size_t i = 0; i < sc.size(); ++i) {
    CAPTURE(sc[i].first);
    CHECK(sg[i].second.device() == kGpu);
    CHECK_CLOSE(sg[i].second.to(Device()), sc[i].second, rtol, atol);
  }
  return calls;
}

}  // namespace

TEST_CASE("gpu optim: the multi-tensor ops are registered for cuda") {
  CHECK(ops::has_multi_tensor(kGpu, DType::float32));
  CHECK(ops::has_multi_tensor(kGpu, DType::float64));
}

TEST_CASE("gpu optim: a step of resnet56's parameters on cuda equals the CPU step, one call per group") {
  using V = std::vector<int64_t>;
  SUBCASE("sgd momentum") {
    // One group per step: the parameter without a gradient at step 1 made its first update (the
    // one that initialises the buffer, which only first updates share) at step 0 with the others.
    CHECK(compare([](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0.9, 0, 1e-4}); }, 1e-5, 1e-6) ==
          V{1, 1, 1});
  }
  SUBCASE("nesterov, clipped") {
    compare([](NamedTensors p) { return optim::sgd(std::move(p), {0.1, 0.9, 0, 1e-4, true}); }, 1e-5, 1e-6, true);
  }
  SUBCASE("adam") {
    // Adam groups by update count: step 2 has the lagging parameter alone.
    CHECK(compare([](NamedTensors p) { return optim::adam(std::move(p), {1e-3, 0.9, 0.999, 1e-8, 1e-4}); }, 1e-4,
                  1e-6) == V{1, 1, 2});
  }
  SUBCASE("adamw") {
    compare([](NamedTensors p) { return optim::adamw(std::move(p), {1e-3, 0.9, 0.999, 1e-8, 1e-2}); }, 1e-4, 1e-6);
  }
  SUBCASE("lars") {
    optim::LARSOptions o;
    o.weight_decay = 5e-4;
    // Two groups every step: the 1-d parameters (no decay, local rate 1) and the others.
    CHECK(compare([o](NamedTensors p) { return optim::lars(std::move(p), o); }, 1e-4, 1e-6) == V{2, 2, 2});
  }
}
