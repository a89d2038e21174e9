// Short training runs of mnist-cnn with train::Trainer on cuda:0 (TrainConfig.device), on a
// learnable synthetic task (each class lights its own 6x6 patch of a 28x28 noise image):
//  - float32 under both GPU backends: the loss falls and test accuracy beats chance (10%) clearly;
//  - compute_dtype float16 (GradScaler) and bfloat16 reach a loss and accuracy close to float32's;
//  - a run stopped at max_steps (checkpoint written from GPU tensors) and resumed gives the same
//    next-step losses as the uninterrupted run: bit for bit under "native" (kiln's CUDA kernels
//    reduce in a fixed order), within 1e-4 relative under "cudnn" (cuDNN may pick
//    backward-weights algorithms that accumulate with atomics, in no fixed order).
// Skipped without a device (tests/gpu/main.cpp).
//   ctest --test-dir build -L gpu -R gpu_train --output-on-failure
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/dispatch.h"
#include "engine/random.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"
#include "nets/zoo.h"
#include "tests/gpu/gpu_compare.h"
#include "tests/support/testing.h"
#include "train/trainer.h"

using namespace kiln;
using kiln::gputest::kGpu;
using kiln::gputest::kGpuBackends;
using kiln::gputest::rel_diff;

namespace {

// n images [1, 28, 28]: uniform noise in [0, 0.5) plus 1.0 on class c's 6x6 patch (rows 2, 10,
// 18 by c / 4; columns 1, 8, 15, 22 by c % 4); labels c = i % 10. A convnet learns it in a few
// dozen steps; chance is 10%.
std::shared_ptr<const Dataset> patches(int64_t n, uint64_t seed) {
  Tensor x = test::make_input({n, 1, 28, 28}, seed, DType::float32, 0, 0.5);
  std::vector<double> y(static_cast<size_t>(n));
  float* p = x.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % 10, r0 = 2 + 8 * (c / 4), c0 = 1 + 7 * (c % 4);
    y[size_t(i)] = double(c);
    for (int64_t r = r0; r < r0 + 6; ++r)
      for (int64_t q = c0; q < c0 + 6; ++q) p[i * 784 + r * 28 + q] += 1.0f;
  }
  return std::make_shared<TensorDataset>(x, from_vector(y, {n}, TensorOptions(DType::int64)));
}

// The sizes of the runs. The emulated device (preset emu-device) runs kiln's kernels at a few
// hundred MFLOP/s: there, one epoch of 24 steps of 16 images (the patches are learnt within it).
#if defined(KILN_EMU_DEVICE)
constexpr int64_t kTrain = 384, kTest = 200, kBatch = 16, kEpochs = 1;
#else
constexpr int64_t kTrain = 2048, kTest = 500, kBatch = 64, kEpochs = 2;
#endif
constexpr size_t kStepsPerEpoch = size_t(kTrain / kBatch), kSteps = kStepsPerEpoch * size_t(kEpochs);
constexpr size_t kStop = kStepsPerEpoch * 2 / 5;  // where the interrupted run stops

Splits patch_splits() {
  Splits s;
  s.train = patches(kTrain, 1);
  s.test = patches(kTest, 2);
  s.name = "synthetic";  // default transforms: to_float only (the inputs are floats already)
  s.sample_shape = {1, 28, 28};
  s.classes = 10;
  return s;
}

train::TrainConfig config(DType compute) {
  train::TrainConfig c;
  c.model_name = "mnist-cnn";
  c.epochs = int(kEpochs);
  c.batch_size = kBatch;
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.05;
  c.optimizer.momentum = 0.9;
  c.seed = 3;
  c.workers = 2;
  c.progress = false;
  c.epoch_lines = false;
  c.histograms = false;
  c.device = kGpu;
  c.compute_dtype = compute;
  return c;
}

ModulePtr fresh_model() {
  manual_seed(11);
  return nets::build("mnist-cnn");
}

double mean_of(const std::vector<float>& v, size_t from, size_t to) {
  to = std::min(to, v.size());
  if (from >= to) return NAN;
  return std::accumulate(v.begin() + long(from), v.begin() + long(to), 0.0) / double(to - from);
}

struct RunResult {
  double first = NAN, last = NAN, top1 = 0;  // mean loss of the first / last 8 steps; test accuracy
};

RunResult train_once(DType compute) {
  train::Trainer t(fresh_model(), patch_splits(), config(compute));
  t.fit();
  RunResult r;
  const auto& l = t.step_losses();
  r.first = mean_of(l, 0, 8);
  r.last = mean_of(l, l.size() >= 8 ? l.size() - 8 : 0, l.size());
  if (!t.history().empty()) r.top1 = t.history().back().val.top1;
  CHECK(l.size() == kSteps);
  CHECK(t.model().named_parameters().front().second.device() == kGpu);
  return r;
}

}  // namespace

TEST_CASE("gpu train: mnist-cnn learns a synthetic task on cuda in float32, float16 and bfloat16") {
  for (const auto& b : kGpuBackends) {
    const std::string backend = b.name;
    CAPTURE(backend);
    BackendGuard g(b.name, b.strict);
    RunResult f32;
    try {
      f32 = train_once(DType::float32);
      MESSAGE(backend << " float32: loss " << f32.first << " -> " << f32.last << ", test top-1 " << f32.top1);
      // The loss starts near ln(10) = 2.3; the patches are learnt within the run.
      CHECK(f32.last < 0.5 * f32.first);
      CHECK(f32.top1 > 0.6);  // chance: 0.1
    } catch (const Error& e) {
      FAIL_CHECK("float32 training threw: " << std::string(e.what()));
      continue;
    }
    for (DType dt : {DType::float16, DType::bfloat16}) {
      CAPTURE(dt);
      try {
        RunResult h = train_once(dt);
        MESSAGE(backend << " " << std::string(dtype_name(dt)) << ": loss " << h.first << " -> " << h.last << ", test top-1 " << h.top1);
        // Half precision rounds activations (11 / 8 mantissa bits), so the trajectory differs from
        // float32's; it must still learn about as well: the final loss within 2x + 0.1 of
        // float32's, and accuracy within 10 points. A broken half path (gradients underflowing
        // without loss scaling, a wrong cast) stalls near ln(10) = 2.3 or goes to NaN.
        CHECK(std::isfinite(h.last));
        CHECK(h.last < 0.5 * h.first);
        CHECK(h.last <= 2 * f32.last + 0.1);
        CHECK(h.top1 >= f32.top1 - 0.1);
      } catch (const Error& e) { FAIL_CHECK("training threw: " << std::string(e.what())); }
    }
  }
}

TEST_CASE(
    "gpu train: a run stopped at max_steps and resumed from its GPU checkpoint continues as the uninterrupted run") {
  for (const auto& b : kGpuBackends) {
    const std::string backend = b.name;
    CAPTURE(backend);
    BackendGuard g(b.name, b.strict);
    try {
      test::TempDir full_dir("gpu_train_full"), part_dir("gpu_train_part");
      auto cfg = [&](const test::TempDir& dir) {
        train::TrainConfig c = config(DType::float32);
        c.epochs = 1;
        c.checkpoint_dir = dir.path.string();
        return c;
      };
      train::Trainer full(fresh_model(), patch_splits(), cfg(full_dir));
      full.fit();
      if (!(full.step_losses().size() == kStepsPerEpoch)) {  // not REQUIRE: the other backend still runs
        FAIL_CHECK("the uninterrupted run did not take " << kStepsPerEpoch << " steps");
        continue;
      }

      train::TrainConfig c1 = cfg(part_dir);
      c1.max_steps = int64_t(kStop);
      train::Trainer first(fresh_model(), patch_splits(), c1);
      first.fit();
      CHECK(first.interrupted());
      CHECK(first.step() == int64_t(kStop));
      if (first.last_checkpoint().empty()) {  // not REQUIRE: the other backend still runs
        FAIL_CHECK("the stopped run wrote no checkpoint");
        continue;
      }

      manual_seed(12345);  // another RNG state: the checkpoint restores it
      train::TrainConfig c2 = cfg(part_dir);
      c2.resume = "latest";
      manual_seed(99);
      train::Trainer second(nets::build("mnist-cnn"), patch_splits(), c2);  // other weights: overwritten
      second.fit();
      if (!(second.step_losses().size() == kStepsPerEpoch - kStop)) {  // not REQUIRE: the other backend still runs
        FAIL_CHECK("the resumed run did not take the remaining " << kStepsPerEpoch - kStop << " steps");
        continue;
      }

      const std::vector<float>& fl = full.step_losses();
      for (size_t i = 0; i < kStop; ++i) {
        CAPTURE(i);
        CHECK(first.step_losses()[i] == doctest::Approx(fl[i]).epsilon(1e-4));
      }
      for (size_t i = 0; i < kStepsPerEpoch - kStop; ++i) {
        CAPTURE(i);
        const float want = fl[kStop + i], got = second.step_losses()[i];
        if (b.strict)  // kiln's own kernels: fixed reduction orders, the same bits
          CHECK(got == want);
        else
          CHECK(got == doctest::Approx(want).epsilon(1e-4));
      }
      // The weights at the end, moved to the host.
      NamedTensors wf = full.model().state_dict(), ws = second.model().state_dict();
      if (!(wf.size() == ws.size())) {  // not REQUIRE: the other backend still runs
        FAIL_CHECK("the state dicts differ in size");
        continue;
      }
      for (size_t i = 0; i < wf.size(); ++i) {
        CAPTURE(wf[i].first);
        CHECK(ws[i].second.device() == kGpu);
        CHECK(rel_diff(ws[i].second, wf[i].second) <= (b.strict ? 0.0 : 1e-4));
      }
    } catch (const Error& e) { FAIL_CHECK("threw: " << std::string(e.what())); }
  }
}
