// world_from_env: rank, size and local rank from Open MPI, SLURM, MVAPICH and PMI variables,
// set and unset here with setenv (the process's own environment; under mpirun this test is not run).
//   ctest --test-dir build -R dist.test_world
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "dist/comm.h"
#include "tests/support/testing.h"

namespace kiln::test {
namespace {

const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_PROCID",
                             "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                             "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                             "MV2_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                             "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"};

// Sets exactly `vars` among the launcher variables for its scope, restoring the rest after.
struct Env {
  std::map<std::string, std::string> saved;
  explicit Env(const std::map<std::string, std::string>& vars) {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved[v] = old;
      unsetenv(v);
    }
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved) setenv(k.c_str(), v.c_str(), 1);
  }
};

TEST_CASE("no launcher: rank 0 of 1") {
  Env e({});
  dist::World w = dist::world_from_env();
  CHECK(w.rank == 0);
  CHECK(w.size == 1);
  CHECK(w.local_rank == 0);
  CHECK(w.launcher == "none");
  CHECK_FALSE(dist::launched_distributed());
}

TEST_CASE("Open MPI variables") {
  Env e({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  dist::World w = dist::world_from_env();
  CHECK(w.launcher == "openmpi");
  CHECK(w.rank == 5);
  CHECK(w.size == 8);
  CHECK(w.local_rank == 1);
  CHECK(w.local_size == 4);
  CHECK(dist::launched_distributed());
}

TEST_CASE("SLURM variables, local size from SLURM_TASKS_PER_NODE") {
  Env e({{"SLURM_NTASKS", "7"}, {"SLURM_PROCID", "6"}, {"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
  dist::World w = dist::world_from_env();
  CHECK(w.launcher == "slurm");
  CHECK(w.rank == 6);
  CHECK(w.size == 7);
  CHECK(w.local_size == 1);
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_LOCALID", "1", 1);
  w = dist::world_from_env();
  CHECK(w.local_rank == 1);
  CHECK(w.local_size == 2);
  setenv("SLURM_NTASKS_PER_NODE", "3", 1);
  CHECK(dist::world_from_env().local_size == 3);
}

TEST_CASE("MVAPICH and PMI variables") {
  {
    Env e({{"MV2_COMM_WORLD_SIZE", "4"}, {"MV2_COMM_WORLD_RANK", "2"}, {"MV2_COMM_WORLD_LOCAL_RANK", "0"},
           {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}});
    dist::World w = dist::world_from_env();
    CHECK(w.launcher == "mvapich");
    CHECK(w.rank == 2);
    CHECK(w.local_size == 2);
  }
  {
    Env e({{"PMI_SIZE", "3"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "3"}});
    dist::World w = dist::world_from_env();
    CHECK(w.launcher == "pmi");
    CHECK(w.rank == 1);
    CHECK(w.size == 3);
    CHECK(w.local_rank == 1);
  }
}

TEST_CASE("malformed values name the variable") {
  {
    Env e({{"OMPI_COMM_WORLD_SIZE", "four"}, {"OMPI_COMM_WORLD_RANK", "0"}});
    CHECK_THROWS_KILN(dist::world_from_env(), "OMPI_COMM_WORLD_SIZE='four'");
  }
  {
    Env e({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}});
    CHECK_THROWS_KILN(dist::world_from_env(), "OMPI_COMM_WORLD_RANK=2 is not below the job size 2");
  }
  {
    Env e({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "-1"}});
    CHECK_THROWS_KILN(dist::world_from_env(), "SLURM_PROCID='-1'");
  }
  {
    Env e({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_TASKS_PER_NODE", "2(y3)"}});
    CHECK_THROWS_KILN(dist::world_from_env(), "SLURM_TASKS_PER_NODE='2(y3)' is malformed");
  }
}

}  // namespace
}  // namespace kiln::test
