// Job metrics under sync: with several ranks the Trainer's epoch figures are the job's (loss and
// accuracy weighted by every rank's samples, images/s over all ranks with each rank's own beside),
// and the logged rows are the job's too. Parameter servers and async, which need a server and two
// workers: test_job_metrics_ps.cpp (3 and 4 ranks only).
//   ctest --test-dir build -L mpi -R job_metrics
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

TEST_CASE("sync: the epoch's loss is every rank's samples averaged, images/s the job's with each rank's") {
  std::shared_ptr<dist::Communicator> comm = test::world_comm();
  const int n = comm->size();
  // 96 samples of batch 8 over 2, 3 or 4 ranks: full batches only, so every step weighs alike.
  train::TrainConfig c = test::sync_trainer_config(8);
  c.dist.strategy = dist::StrategyKind::sync;
  test::TempDir dir("job_metrics");
  c.logdir = (dir.path / ("rank" + std::to_string(comm->rank()))).string();
  c.log_every = 2;
  train::Trainer t(test::sync_small_cnn(), test::sync_synthetic(), c, comm);
  t.fit();
  REQUIRE(t.history().size() == 1);
  const train::EpochSummary& e = t.history()[0];
  const auto [sum, steps] = summed_losses(*comm, t.step_losses());
  CHECK(steps == 96 / 8);
  CHECK(e.train_loss == doctest::Approx(sum / steps).epsilon(1e-12));
  REQUIRE(e.rank_images_per_s.size() == size_t(n));
  for (double v : e.rank_images_per_s) CHECK(v > 0);
  CHECK(e.images_per_s > 0);
  CHECK(e.images_per_s <= std::accumulate(e.rank_images_per_s.begin(), e.rank_images_per_s.end(), 0.0) * 1.0001);
  if (comm->rank() != 0) return;
  // The chief's train.csv has the job's columns, and ranks.csv a row per rank at each log point
  // and at the epoch's end.
  std::ifstream csv(c.logdir + "/train.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header == "step,epoch,loss,accuracy,learning_rate,images_per_second");
  std::ifstream ranks(c.logdir + "/ranks.csv");
  int rows = 0;
  for (std::string line; std::getline(ranks, line);) ++rows;
  CHECK(rows == 1 + n * (96 / (8 * n) / 2) + n);  // header, n rows per log point, n at the epoch end
}
