// kiln's own CUDA losses (kernels/cuda/native/loss.cu) under the emulator against
// kernels/cpu/ref/loss.h: cross-entropy (warp-per-sample [N, C] and thread-per-position
// [N, C, S] paths, C up to 1000), NLL, BCE with logits (with and without pos_weight) and MSE,
// every reduction, ignore_index and label smoothing. float64 against the float64 ref at 1e-12
// (tree versus sequential summation); float32 once at 2e-5 (float32 exp/log over 1000 classes).
//   Run: ctest --test-dir build -R emu.test_loss
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ref/loss.h"
#include "kernels/cuda/native/loss.h"

#include "tests/emu/emu_testing.h"

using namespace kiln;

namespace {

using emu_test::check_near;
using emu_test::rnd;

std::vector<int64_t> targets(int64_t m, int64_t C, int64_t ignore, uint64_t seed, bool all_ignored = false) {
  std::mt19937_64 g(seed);
  std::vector<int64_t> t(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) t[size_t(i)] = all_ignored || i % 4 == 1 ? ignore : int64_t(g() % uint64_t(C));
  return t;
}

const Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

}  // namespace

TEST_CASE("emu cross_entropy and nll fwd/bwd against ref") {
  const int64_t shapes[][3] = {{7, 5, 1}, {3, 1000, 1}, {3, 5, 4}, {2, 33, 3}, {1, 1, 1}};
  for (const auto& sh : shapes)
    for (Reduction r : kReductions)
      for (double eps : {0.0, 0.1})
        for (bool all_ignored : {false, true}) {
          if (all_ignored && (eps != 0 || sh[1] == 1000)) continue;  // the 0/0 rule once per shape is enough
          ClassLossDesc d;
          d.dtype = DType::float64, d.N = sh[0], d.C = sh[1], d.S = sh[2], d.reduction = r;
          d.label_smoothing = eps, d.ignore_index = -100;
          CAPTURE(d.str());
          CAPTURE(all_ignored);
          const int64_t m = d.N * d.S;
          const size_t n = size_t(m * d.C), no = r == Reduction::none ? size_t(m) : 1;
          const std::vector<double> x = rnd(n, 51, -3, 3), dy = rnd(no, 52);
          const std::vector<int64_t> t = targets(m, d.C, d.ignore_index, 53, all_ignored);
          std::vector<double> y(no), yr(no), lse(static_cast<size_t>(m)), lser(static_cast<size_t>(m)), dx(n), dxr(n);
          cuda::cross_entropy_fwd(d, x.data(), t.data(), y.data(), lse.data());
          ref::cross_entropy_fwd<double>(d, x.data(), t.data(), yr.data(), lser.data());
          check_near(y, yr, 1e-12, "ce dst");
          check_near(lse, lser, 1e-12, "ce save_lse");
          cuda::cross_entropy_bwd(d, x.data(), t.data(), lser.data(), dy.data(), dx.data());
          ref::cross_entropy_bwd<double>(d, x.data(), t.data(), lser.data(), dy.data(), dxr.data());
          check_near(dx, dxr, 1e-12, "ce diff_src");
          cuda::nll_fwd(d, x.data(), t.data(), y.data());
          ref::nll_fwd<double>(d, x.data(), t.data(), yr.data());
          check_near(y, yr, 1e-12, "nll dst");
          cuda::nll_bwd(d, t.data(), dy.data(), dx.data());
          ref::nll_bwd<double>(d, t.data(), dy.data(), dxr.data());
          check_near(dx, dxr, 1e-12, "nll diff_src");
        }
}

TEST_CASE("emu cross_entropy float32 over 1000 classes") {
  ClassLossDesc d;
  d.N = 5, d.C = 1000, d.S = 1, d.reduction = Reduction::mean, d.label_smoothing = 0.1;
  const size_t n = size_t(d.N * d.C);
  const std::vector<double> x = rnd(n, 61, -5, 5), dy = {0.7};
  const std::vector<int64_t> t = targets(d.N, d.C, d.ignore_index, 62);
  std::vector<double> yr(1), lser(static_cast<size_t>(d.N)), dxr(n);
  d.dtype = DType::float64;
  ref::cross_entropy_fwd<double>(d, x.data(), t.data(), yr.data(), lser.data());
  ref::cross_entropy_bwd<double>(d, x.data(), t.data(), lser.data(), dy.data(), dxr.data());
  d.dtype = DType::float32;
  const std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
  std::vector<float> y(1), lse(static_cast<size_t>(d.N)), dx(n);
  cuda::cross_entropy_fwd(d, xf.data(), t.data(), y.data(), lse.data());
  cuda::cross_entropy_bwd(d, xf.data(), t.data(), lse.data(), dyf.data(), dx.data());
  check_near(y, yr, 2e-5, "dst");
  check_near(lse, lser, 2e-5, "save_lse");
  check_near(dx, dxr, 2e-5, "diff_src");
}

TEST_CASE("emu point losses (BCE with logits, MSE) fwd/bwd against ref") {
  for (int64_t n : {1, 7, 33, 255, 1000})
    for (PointLoss kind : {PointLoss::bce_logits, PointLoss::mse})
      for (Reduction r : kReductions)
        for (bool pw : {false, true}) {
          if (pw && kind == PointLoss::mse) continue;
          PointLossDesc d;
          d.kind = kind, d.dtype = DType::float64, d.n = n, d.reduction = r;
          CAPTURE(d.str());
          CAPTURE(pw);
          const size_t un = size_t(n), no = r == Reduction::none ? un : 1;
          const std::vector<double> x = rnd(un, 71, -6, 6), t = rnd(un, 72, 0, 1), w = rnd(un, 73, 0.5, 3);
          const std::vector<double> dy = rnd(no, 74);
          const double* pwp = pw ? w.data() : nullptr;
          std::vector<double> y(no), yr(no), dx(un), dxr(un), dt(un), dtr(un);
          cuda::point_loss_fwd(d, x.data(), t.data(), pwp, y.data());
          ref::point_loss_fwd<double>(d, x.data(), t.data(), pwp, yr.data());
          check_near(y, yr, 1e-12, "dst");
          cuda::point_loss_bwd(d, x.data(), t.data(), pwp, dy.data(), dx.data(), dt.data());
          ref::point_loss_bwd<double>(d, x.data(), t.data(), pwp, dy.data(), dxr.data(), dtr.data());
          check_near(dx, dxr, 1e-12, "diff_src");
          check_near(dt, dtr, 1e-12, "diff_target");
          std::vector<double> dx2(un);  // diff_target is nullable
          cuda::point_loss_bwd(d, x.data(), t.data(), pwp, dy.data(), dx2.data(), nullptr);
          check_near(dx2, dxr, 1e-12, "diff_src alone");
        }
}
