// The strategy names, DistConfig's checks and the factory on one rank, without MPI (the strategies
// on several ranks: tests/mpi/test_strategy.cpp).
//   ctest --test-dir build -R dist.test_strategy
#include <doctest/doctest.h>

#include <vector>

#include "dist/comm.h"
#include "dist/strategy.h"
#include "engine/optim.h"
#include "layers/linear.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

using dist::StrategyKind;

TEST_CASE("strategy: names round trip and are the ones --strategy takes") {
  CHECK(dist::all_strategies().size() == 4);
  for (StrategyKind k : dist::all_strategies()) CHECK(dist::parse_strategy(dist::strategy_name(k)) == k);
  CHECK(std::string(dist::strategy_name(StrategyKind::none)) == "none");
  CHECK(std::string(dist::strategy_name(StrategyKind::sync)) == "sync");
  CHECK(std::string(dist::strategy_name(StrategyKind::async)) == "async");
  CHECK(std::string(dist::strategy_name(StrategyKind::ps)) == "ps");
}

TEST_CASE("strategy: an unknown name is an error listing the valid ones") {
  for (const char* bad : {"allreduce", "", "SYNC", "horovod", "ps "}) {
    CHECK_THROWS_KILN(dist::parse_strategy(bad), "--strategy: 'sync', 'async' or 'ps', not '" + std::string(bad) + "'");
    CHECK_THROWS_KILN(dist::parse_strategy(bad), "'none'");
  }
}

TEST_CASE("strategy: check_dist_config names the flag that is wrong") {
  dist::DistConfig c;
  dist::check_dist_config(c);
  c.sync_bn = true;
  CHECK_THROWS_KILN(dist::check_dist_config(c), "--sync-bn needs --strategy sync");
  c.strategy = StrategyKind::ps;
  CHECK_THROWS_KILN(dist::check_dist_config(c), "parameter servers hold no batch statistics");
  c.strategy = StrategyKind::sync;
  dist::check_dist_config(c, 4);

  c = {};
  c.comm_options.timeout_s = 0;
  dist::check_dist_config(c);  // none: no communicator, its options unused
  c.strategy = StrategyKind::sync;
  CHECK_THROWS_KILN(dist::check_dist_config(c), "--comm-timeout and --comm-warn must be positive");
  c.comm_options.timeout_s = 10;
  CHECK_THROWS_KILN(dist::parse_allreduce("tree"), "--allreduce: 'library', 'ring', 'hierarchical', not 'tree'");
  c.comm_options.algorithm = dist::parse_allreduce("ring");
  CHECK(c.comm_options.algorithm == dist::AllreduceAlgorithm::ring);
  for (const dist::AllreduceAlgorithmInfo& a : dist::all_allreduce_algorithms())
    CHECK(dist::parse_allreduce(dist::allreduce_name(a.algorithm)) == a.algorithm);
  c.sync.bucket_mb = 0;
  CHECK_THROWS_KILN(dist::check_dist_config(c), "--bucket-mb must be positive");

  c = {};
  c.strategy = StrategyKind::ps;
  c.ps_servers = 0;
  CHECK_THROWS_KILN(dist::check_dist_config(c), "PsOptions::servers (--ps) is 0");
  c.ps_servers = 2;
  dist::check_dist_config(c);  // the job's size unknown: two servers may leave workers
  CHECK_THROWS_KILN(dist::check_dist_config(c, 2), "which leaves no worker");
  dist::check_dist_config(c, 3);
  c.staleness = 3;
  CHECK_THROWS_KILN(dist::check_dist_config(c, 3), "applies to asynchronous servers only");
  c.ps_synchronous = false;
  dist::check_dist_config(c, 3);
  c.strategy = StrategyKind::async;
  c.ps_synchronous = true;  // async servers are asynchronous whatever ps_synchronous says
  dist::check_dist_config(c, 3);
  c.staleness = -2;
  CHECK_THROWS_KILN(dist::check_dist_config(c, 3), "--staleness");
}

TEST_CASE("strategy: the communicator and parameter-server options each strategy needs") {
  dist::DistConfig c;
  CHECK(dist::communicator_backend(c) == "auto");
  c.strategy = StrategyKind::sync;
  CHECK(dist::communicator_backend(c) == "auto");
  for (StrategyKind k : {StrategyKind::async, StrategyKind::ps}) {
    c.strategy = k;
    c.comm = "auto";
    CHECK(dist::communicator_backend(c) == "mpi");  // any-source receives
    c.comm = "nccl";
    CHECK(dist::communicator_backend(c) == "nccl");  // asked for: make_communicator decides
  }

  c = {};
  c.strategy = StrategyKind::ps;
  c.ps_servers = 2;
  c.staleness = -1;
  optim::OptimizerConfig adam{"adam", 0.5};
  dist::PsOptions po = dist::ps_options(c, adam);
  CHECK(po.servers == 2);
  CHECK(po.synchronous);
  CHECK(po.staleness == -1);
  CHECK(po.optimizer.name == "adam");
  CHECK(po.optimizer.lr == 0.5);
  c.ps_synchronous = false;
  CHECK_FALSE(dist::ps_options(c).synchronous);
  c.ps_synchronous = true;
  c.strategy = StrategyKind::async;
  CHECK_FALSE(dist::ps_options(c).synchronous);
}

TEST_CASE("strategy: on one rank (or without a communicator) every strategy runs locally") {
  auto comm = dist::make_local_communicator();
  for (dist::Communicator* world : {comm.get(), static_cast<dist::Communicator*>(nullptr)})
    for (StrategyKind k : dist::all_strategies()) {
      CAPTURE(dist::strategy_name(k));
      Linear net(3, 2);
      dist::DistConfig c;
      c.strategy = k;
      auto s = dist::make_strategy(c, world, net);
      REQUIRE(s);
      CHECK(s->kind() == StrategyKind::none);
      CHECK(s->report().kind == StrategyKind::none);
      CHECK(s->is_chief());
      CHECK_FALSE(s->is_server());
      CHECK(s->workers() == 1);
      CHECK(s->worker_index() == 0);
      CHECK(s->report().ranks == 1);
      CHECK_FALSE(s->sums_over_ranks());
      CHECK_THROWS_KILN(s->serve(), "not a parameter server");

      bool stop_any = false;
      CHECK(s->begin_step(true, true, &stop_any) == 1);
      CHECK(stop_any);
      CHECK(s->begin_step(false, false, &stop_any) == 0);
      CHECK_FALSE(stop_any);

      // The update is this rank's optimizer step; nullptr (kiln bench) updates nothing.
      auto opt = optim::make_optimizer({"sgd", 0.5, 0}, net.named_parameters());
      Tensor w = net.named_parameters().front().second;
      const std::vector<double> before = w.to_vector();
      w.set_grad(ones(w.sizes()));
      s->finish_gradients();
      s->step(nullptr, 0.5);
      CHECK(w.to_vector() == before);
      s->step(opt.get(), 0.5);
      const std::vector<double> after = w.to_vector();
      for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == doctest::Approx(before[i] - 0.5));
      s->finish();
      CHECK(s->report().last_wait_s == 0);
    }
}

TEST_CASE("strategy: make_strategy checks the configuration first") {
  auto comm = dist::make_local_communicator();
  Linear net(3, 2);
  dist::DistConfig c;
  c.sync_bn = true;
  CHECK_THROWS_KILN(dist::make_strategy(c, comm.get(), net), "--sync-bn needs --strategy sync");
  c.strategy = StrategyKind::sync;
  CHECK(dist::make_strategy(c, comm.get(), net)->kind() == StrategyKind::none);  // one rank: a plain run
}

}  // namespace
}  // namespace kiln::test
