// The settings fingerprint: every rank of a job compares what must agree (batch size per rank,
// optimizer and its hyper-parameters, schedule, dtype, strategy, data set) at start; a difference
// is a kiln::Error on every rank naming the setting and the ranks' values, before any step runs.
//   ctest --test-dir build -L mpi -R settings
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "dist/comm.h"
#include "dist/settings.h"
#include "io/data/datasets.h"
#include "train/trainer.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/mpi/trainer_testing.h"

using namespace kiln;

namespace {

// What check_settings throws on this rank ("" when it returns).
std::string settings_error(dist::Communicator& comm, const dist::Settings& mine) {
  try {
    dist::check_settings(comm, mine);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What constructing a sync Trainer throws on this rank with `edit` applied on the last rank.
template <class Edit>
std::string trainer_error(Edit edit) {
  std::shared_ptr<dist::Communicator> comm = test::world_comm();
  train::TrainConfig c = test::sync_trainer_config(8);
  c.dist.strategy = dist::StrategyKind::sync;
  if (comm->rank() == comm->size() - 1) edit(c);
  try {
    train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), c, comm);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("settings_differences names each differing setting with rank 0's value and the others'") {
  const dist::Settings a = {{"batch size per rank", "32"}, {"optimizer", "sgd"}, {"seed", "1"}};
  dist::Settings b = a, c = a;
  CHECK(dist::settings_differences({a, b, c}) == "");
  b[0].value = "16";
  c[1].value = "adam";
  c.push_back({"extra", "x"});
  CHECK(dist::settings_differences({a, b, c}) ==
        "  batch size per rank: rank 0 has 32, rank 1 has 16\n"
        "  optimizer: rank 0 has sgd, rank 2 has adam\n"
        "  extra: rank 0 has (none), rank 2 has x\n");
}

TEST_CASE("check_settings: the same everywhere passes; one rank's difference is an error on every rank") {
  auto comm = test::world_comm();
  const dist::Settings same = {{"batch size per rank", "32"}, {"optimizer", "sgd"}};
  CHECK(settings_error(*comm, same) == "");
  if (comm->size() < 2) return;
  dist::Settings mine = same;
  const int odd = comm->size() - 1;
  if (comm->rank() == odd) mine[0].value = "16";
  const std::string msg = settings_error(*comm, mine);
  INFO(msg);
  CHECK(msg.find("the ranks' settings differ") != std::string::npos);
  CHECK(msg.find("batch size per rank: rank 0 has 32, rank " + std::to_string(odd) + " has 16") != std::string::npos);
  CHECK(msg.find("optimizer") == std::string::npos);  // only what differs
  // Still usable afterwards: the check is collective and leaves nothing pending.
  CHECK(settings_error(*comm, same) == "");
}

TEST_CASE("a Trainer whose batch size or optimizer differs on one rank fails on every rank, naming both values") {
  const std::string batch = trainer_error([](train::TrainConfig& c) { c.batch_size = 4; });
  INFO(batch);
  auto comm = test::world_comm();
  if (comm->size() < 2) return;
  const std::string last = std::to_string(comm->size() - 1);
  CHECK(batch.find("batch size per rank: rank 0 has 8, rank " + last + " has 4") != std::string::npos);
  const std::string opt = trainer_error([](train::TrainConfig& c) { c.optimizer = {"adam", 1e-3}; });
  INFO(opt);
  CHECK(opt.find("optimizer: rank 0 has sgd, rank " + last + " has adam") != std::string::npos);
  CHECK(opt.find("learning rate: rank 0 has 0.05, rank " + last + " has 0.001") != std::string::npos);
  const std::string data = trainer_error([](train::TrainConfig& c) { c.limit_train = 40; });
  INFO(data);
  CHECK(data.find("training samples: rank 0 has 96, rank " + last + " has 40") != std::string::npos);
  // What may differ does not stop the job.
  CHECK(trainer_error([](train::TrainConfig& c) { c.workers = 1; c.progress = true; }) == "");
}
