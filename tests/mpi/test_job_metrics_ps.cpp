// Job metrics under parameter servers and async (one server and at least two workers: run at 3 and
// 4 ranks only, tests/CMakeLists.txt KILN_MPI_RANKS_test_job_metrics_ps): the workers' epoch
// figures are the job's, the chief reports the servers' statistics, and async's images/s come from
// the servers' intake with no collective among workers at an epoch's end.
//   ctest --test-dir build -L mpi -R job_metrics_ps
#include <doctest/doctest.h>

#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "io/data/datasets.h"
#include "train/trainer.h"
#include "tests/mpi/mpi_testing.h"
#include "tests/mpi/trainer_testing.h"

using namespace kiln;

namespace {

// {sum of this rank's step losses, its steps} summed over `comm`.
std::pair<double, double> summed_losses(dist::Communicator& comm, const std::vector<float>& losses) {
  Tensor t = from_vector(std::vector<double>{std::accumulate(losses.begin(), losses.end(), 0.0), double(losses.size())},
                         {2}, DType::float64);
  comm.allreduce(t, dist::ReduceOp::sum, "test losses");
  return {t.data<double>()[0], t.data<double>()[1]};
}

}  // namespace

TEST_CASE("ps: the workers' epoch figures are the job's, and the chief reports the servers' statistics") {
  std::shared_ptr<dist::Communicator> comm = test::world_comm();
  const int n = comm->size();
  REQUIRE(n >= 3);  // one server and at least two workers
  train::TrainConfig c = test::sync_trainer_config(8);
  c.dist.strategy = dist::StrategyKind::ps;
  c.dist.ps_servers = 1;
  train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), c, comm);
  t.fit();
  std::unique_ptr<dist::Communicator> workers = comm->split(t.is_server() ? 1 : 0, comm->rank());
  if (t.is_server()) {
    CHECK(t.history().empty());
    return;
  }
  const int w = n - 1;
  REQUIRE(t.history().size() == 1);
  const train::EpochSummary& e = t.history()[0];
  const auto [sum, steps] = summed_losses(*workers, t.step_losses());
  CHECK(steps == 96 / 8);
  CHECK(e.train_loss == doctest::Approx(sum / steps).epsilon(1e-12));
  REQUIRE(e.rank_images_per_s.size() == size_t(w));
  if (comm->rank() == 0) {
    REQUIRE(e.ps.size() == 1);
    CHECK(e.ps[0].pushes == 96 / 8);  // every worker's pushes of the epoch
    CHECK(e.ps[0].pulls == 96 / 8);
    CHECK(e.ps[0].steps == 96 / 8 / w);  // synchronous: one optimizer step per round
  } else {
    CHECK(e.ps.empty());
  }
}

TEST_CASE("async: no collective among workers at an epoch's end; images/s from the servers' intake") {
  std::shared_ptr<dist::Communicator> comm = test::world_comm();
  REQUIRE(comm->size() >= 3);
  train::TrainConfig c = test::sync_trainer_config(8);
  c.dist.strategy = dist::StrategyKind::async;
  c.dist.ps_servers = 1;
  c.epochs = 2;
  train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), c, comm);
  t.fit();
  if (t.is_server() || comm->rank() != 0) return;
  REQUIRE(t.history().size() == 2);
  for (const train::EpochSummary& e : t.history()) {
    CHECK(e.chief_only_metrics);
    REQUIRE(e.ps.size() == 1);
    CHECK(e.images_per_s > 0);
  }
  // The servers' count runs on over both epochs: at least the chief's own pushes, at most everyone's
  // (the other workers may still be pushing when the chief asks: no one waits for anyone).
  const int64_t pushes = t.history()[1].ps[0].pushes, workers = comm->size() - 1;
  CHECK(pushes >= 2 * 96 / 8 / workers);
  CHECK(pushes <= 2 * 96 / 8);
}
