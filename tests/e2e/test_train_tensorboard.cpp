// TensorBoard's own reader (tests/io/read_tfevents.py in the test venv, KILN_TEST_PYTHON) on the
// event files a Trainer writes: every logged step's loss, the scalars of each epoch, one weight
// histogram per parameter. Skipped without the venv's tensorboard; fails without it under CI=true.
//   ctest --test-dir build -R e2e.test_train_tensorboard
#include "tests/support/testing.h"
#include "tests/e2e/train_testing.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/random.h"
#include "io/data/datasets.h"
#include "nets/zoo.h"
#include "train/trainer.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// One epoch of the shared recipe, logging at the Trainer's default interval.
train::TrainConfig small_config(const fs::path& dir) {
  train::TrainConfig c = test::small_train_config(dir);
  const train::TrainConfig defaults;
  c.epochs = 1;
  c.schedule = defaults.schedule;
  c.warmup_epochs = defaults.warmup_epochs;
  c.limit_test = defaults.limit_test;
  c.log_every = defaults.log_every;
  return c;
}

}  // namespace

TEST_CASE("TensorBoard's own reader loads the trainer's scalars and weight histograms") {
  if (!test::need_python("tensorboard")) return;
  Splits data = open_dataset_dir("synthetic:1x28x28:10:640:learnable");
  test::TempDir dir_tmp("e2e_tb");
  const fs::path& dir = dir_tmp.path;
  train::TrainConfig c = small_config(dir);
  c.epochs = 1;
  c.log_every = 2;
  train::Trainer t(test::fresh_mnist_cnn(1), data, c);
  t.fit();
  int rc = 0;
  const std::string out = test::run_capture(test::shell_quote(test::python()) + " '" KILN_SOURCE_DIR
                                            "/tests/io/read_tfevents.py' " + test::shell_quote(dir.string()),
                                            &rc);
  REQUIRE_MESSAGE(rc == 0, out);
  auto j = nlohmann::json::parse(out);
  const auto& loss = j["scalars"]["train/loss"];
  REQUIRE(loss.size() == 5);  // steps 2, 4, ..., 10
  for (size_t i = 0; i < loss.size(); ++i) {
    CHECK(loss[i][0] == int64_t(2 * (i + 1)));
    CHECK(loss[i][1].get<double>() == doctest::Approx(t.step_losses()[2 * i + 1]).epsilon(1e-6));
  }
  for (const char* tag : {"train/accuracy", "train/learning_rate", "train/images_per_second", "epoch/val_accuracy",
                          "epoch/train_loss"})
    CHECK_MESSAGE(j["scalars"].contains(tag), tag);
  const auto& h = j["histograms"];
  CHECK(h.size() == t.model().named_parameters().size());
  const auto& fc = h["weights/" + t.model().named_parameters().back().first];
  REQUIRE(fc.size() == 1);
  CHECK(fc[0]["num"].get<double>() == double(t.model().named_parameters().back().second.numel()));
}
