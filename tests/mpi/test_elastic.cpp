// Elastic resume: a sync job stopped on 2 ranks resumes on 3 (and one of 3 on 2) from its
// checkpoint, the data re-sharded, the epoch position and the optimizer state kept, and ends where
// the uninterrupted run ends: the same global batches (24 samples: 2 x 12 or 3 x 8), synchronised
// batch norm, so the only difference is the order in which the ranks' sums add up. A resume that
// cannot keep the global batch is refused, naming the batch that would.
//   ctest --test-dir build -L mpi -R elastic        (3 ranks)
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "dist/comm.h"
#include "engine/random.h"
#include "io/formats/checkpoint.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "train/trainer.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/mpi/trainer_testing.h"

using namespace kiln;

namespace {

constexpr int64_t kGlobal = 24;

train::TrainConfig elastic_config(int workers, const std::string& dir) {
  train::TrainConfig c = test::sync_trainer_config(kGlobal / workers);
  c.epochs = 2;  // 96 samples: 4 global batches an epoch
  c.optimizer = {"sgd", 0.05, 0.9};
  c.dist.strategy = dist::StrategyKind::sync;
  c.dist.sync_bn = true;
  c.checkpoint_dir = dir;
  return c;
}

// A directory every rank of this job sees (they share the launcher's process as parent).
std::string shared_dir(const std::string& tag) {
  return "/tmp/kiln-test-elastic-" + tag + "-" + std::to_string(::getppid());
}

// Trains on `first` ranks to step 3 (mid-epoch 1), resumes on `second` ranks, and compares the
// final weights with an uninterrupted run on `first` ranks.
void check_elastic(dist::Communicator& world, int first, int second) {
  const std::string dir = shared_dir(std::to_string(first) + "to" + std::to_string(second));
  if (world.rank() == 0) std::filesystem::remove_all(dir);
  world.barrier("clean");
  auto sub = [&](int n) -> std::shared_ptr<dist::Communicator> { return world.split(world.rank() < n ? 0 : -1, world.rank()); };

  std::shared_ptr<dist::Communicator> a = sub(first);
  ModulePtr full_net;
  if (a) {
    train::TrainConfig c = elastic_config(first, dir + "/full");
    full_net = test::sync_small_cnn();
    train::Trainer full(full_net, test::sync_synthetic(), c, a);
    full.fit();
    train::TrainConfig s = elastic_config(first, dir + "/run");
    s.max_steps = 3;
    train::Trainer stopped(test::sync_small_cnn(), test::sync_synthetic(), s, a);
    stopped.fit();
    CHECK(stopped.step() == 3);
  }
  world.barrier("first run done");
  std::shared_ptr<dist::Communicator> b = sub(second);
  if (b) {
    train::TrainConfig c = elastic_config(second, dir + "/run");
    c.resume = "latest";
    ModulePtr net = test::sync_small_cnn();
    train::Trainer resumed(net, test::sync_synthetic(), c, b);
    resumed.fit();
    CHECK(resumed.step() == 8);
    if (world.rank() == 0) {
      REQUIRE(full_net);
      INFO("resumed on ", second, " after ", first, " ranks");
      CHECK(test::max_state_diff(*net, *full_net) < 1e-5);
    }
  }
  world.barrier("resumed");
  if (world.rank() == 0) std::filesystem::remove_all(dir);
}

// The small net without batch norm: parameter-server workers have no synchronised statistics.
ModulePtr ps_net() {
  manual_seed(21);
  auto s = std::make_shared<Sequential>();
  s->add(std::make_shared<Conv2d>(1, 4, 3, 1, 1));
  s->add(std::make_shared<ReLU>());
  s->add(std::make_shared<Flatten>());
  s->add(std::make_shared<Linear>(4 * 6 * 6, 3));
  return s;
}

}  // namespace

TEST_CASE("a ps job of 2 workers and 1 server resumes as 1 worker and 2 servers, optimizer state whole") {
  std::shared_ptr<dist::Communicator> world = test::world_comm();
  REQUIRE(world->size() == 3);
  const std::string dir = shared_dir("ps");
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier("clean");
  auto config = [&](int servers, const std::string& sub) {
    const int workers = 3 - servers;
    train::TrainConfig c = test::sync_trainer_config(kGlobal / workers);
    c.epochs = 2;
    c.optimizer = {"sgd", 0.05, 0.9};  // momentum: the servers' state matters
    c.dist.strategy = dist::StrategyKind::ps;
    c.dist.ps_servers = servers;
    c.checkpoint_dir = dir + "/" + sub;
    return c;
  };
  ModulePtr full_net = ps_net();
  train::Trainer full(full_net, test::sync_synthetic(), config(1, "full"), world);
  full.fit();
  train::TrainConfig s = config(1, "run");
  s.max_steps = 3;
  train::Trainer stopped(ps_net(), test::sync_synthetic(), s, world);
  stopped.fit();
  train::TrainConfig r = config(2, "run");
  r.resume = "latest";
  ModulePtr net = ps_net();
  train::Trainer resumed(net, test::sync_synthetic(), r, world);
  resumed.fit();
  if (world->rank() == 0) {  // the chief holds the final parameters of both jobs
    CHECK(resumed.step() == 8);
    CHECK(test::max_state_diff(*net, *full_net) < 1e-5);
  }
  world->barrier("done");
  if (world->rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a sync job stopped on 2 ranks resumes on 3, and one of 3 on 2, on the same global batch schedule") {
  auto world = test::world_comm();
  REQUIRE(world->size() == 3);
  check_elastic(*world, 2, 3);
  check_elastic(*world, 3, 2);
}

TEST_CASE("an elastic resume that cannot keep the global batch is refused, naming the batch that would") {
  auto world = test::world_comm();
  const std::string dir = shared_dir("refused");
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier("clean");
  std::shared_ptr<dist::Communicator> two = world->split(world->rank() < 2 ? 0 : -1, world->rank());
  if (two) {
    train::TrainConfig s = elastic_config(2, dir);
    s.max_steps = 3;
    train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), s, two);
    t.fit();
  }
  world->barrier("stopped");
  std::shared_ptr<dist::Communicator> all = world->split(0, world->rank());
  train::TrainConfig c = elastic_config(2, dir);  // batch 12 on 3 ranks: global batch 36
  c.resume = "latest";
  std::string msg;
  try {
    train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), c, all);
    t.fit();
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("global batch 24") != std::string::npos);
  CHECK(msg.find("use --batch 8") != std::string::npos);
  world->barrier("refused");
  if (world->rank() == 0) std::filesystem::remove_all(dir);
}
