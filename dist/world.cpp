// World: rank, size, local rank and local size of this process from the launcher's environment
// (Open MPI, SLURM, PMI/PMIx, MVAPICH/MPICH), without calling MPI, so it works before
// dist::init() and in programs that never start MPI.
//   ctest --test-dir build -R dist.test_world
#include <cctype>
#include <cstdlib>
#include <string>

#include "dist/comm.h"

namespace kiln::dist {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

// A non-negative integer, whole string; anything else names the variable.
int parse_int(const char* name, const char* value) {
  std::string s(value);
  KILN_CHECK(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 10,
             "environment variable ", name, "='", s, "' is not a non-negative integer");
  return std::stoi(s);
}

// Reads `name` into `out` when set; returns whether it was.
bool read(const char* name, int& out) {
  const char* v = env(name);
  if (!v) return false;
  out = parse_int(name, v);
  return true;
}

// SLURM_TASKS_PER_NODE: "2(x3),1" = three nodes with 2 tasks, then one with 1. Returns the task
// count of the node this rank is on, given that SLURM places tasks in block order; 0 when the
// value is not of that form (the caller falls back).
int slurm_tasks_on_my_node(const char* value, int rank) {
  std::string s(value);
  int first = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && isdigit(static_cast<unsigned char>(s[j]))) ++j;
    KILN_CHECK(j > i && j - i < 9, "environment variable SLURM_TASKS_PER_NODE='", s, "' is malformed");
    int tasks = std::stoi(s.substr(i, j - i));
    int repeat = 1;
    if (j < s.size() && s[j] == '(') {
      size_t close = s.find(')', j);
      KILN_CHECK(close != std::string::npos && s.compare(j, 2, "(x") == 0 && close > j + 2,
                 "environment variable SLURM_TASKS_PER_NODE='", s, "' is malformed");
      repeat = parse_int("SLURM_TASKS_PER_NODE", s.substr(j + 2, close - j - 2).c_str());
      j = close + 1;
    }
    for (int r = 0; r < repeat; ++r) {
      if (rank < first + tasks) return tasks;
      first += tasks;
    }
    if (j < s.size()) {
      KILN_CHECK(s[j] == ',', "environment variable SLURM_TASKS_PER_NODE='", s, "' is malformed");
      ++j;
    }
    i = j;
  }
  return 0;
}

void validate(const World& w, const char* rank_var) {
  KILN_CHECK(w.size >= 1 && w.rank < w.size, "environment variable ", rank_var, "=", w.rank,
             " is not below the job size ", w.size, " (launcher ", w.launcher, ")");
  KILN_CHECK(w.local_size >= 1 && w.local_rank < w.local_size, "launcher ", w.launcher,
             ": local rank ", w.local_rank, " is not below the local size ", w.local_size);
}

// Launchers that export size, rank, local rank and local size under one prefix.
struct WorldVars {
  const char *launcher, *size, *rank, *local_rank, *local_size;
};

bool from_world_vars(const WorldVars& v, World& w) {
  if (!env(v.size)) return false;
  w.launcher = v.launcher;
  read(v.size, w.size);
  read(v.rank, w.rank);
  w.local_size = w.size;
  w.local_rank = w.rank;
  read(v.local_rank, w.local_rank);
  read(v.local_size, w.local_size);
  validate(w, v.rank);
  return true;
}

}  // namespace

World world_from_env() {
  World w;
  if (from_world_vars({"openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE"},
                      w))
    return w;
  if (env("SLURM_NTASKS") || env("SLURM_NPROCS")) {
    w.launcher = "slurm";
    if (!read("SLURM_NTASKS", w.size)) read("SLURM_NPROCS", w.size);
    read("SLURM_PROCID", w.rank);
    read("SLURM_LOCALID", w.local_rank);
    // SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; SLURM_TASKS_PER_NODE always.
    if (!read("SLURM_NTASKS_PER_NODE", w.local_size)) {
      const char* tpn = env("SLURM_TASKS_PER_NODE");
      int n = tpn ? slurm_tasks_on_my_node(tpn, w.rank) : 0;
      w.local_size = n > 0 ? n : w.local_rank + 1;  // a lower bound when the layout is unknown
    }
    validate(w, "SLURM_PROCID");
    return w;
  }
  if (from_world_vars({"mvapich", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                       "MV2_COMM_WORLD_LOCAL_SIZE"},
                      w))
    return w;
  if (env("PMI_SIZE") || env("PMIX_RANK") || env("PMI_RANK")) {
    // Hydra (MPICH, Intel MPI) sets PMI_RANK/PMI_SIZE and MPI_LOCALRANKID/MPI_LOCALNRANKS;
    // PMIx launchers set PMIX_RANK (the size then comes from PMI_SIZE if present).
    w.launcher = "pmi";
    read("PMI_SIZE", w.size);
    if (!read("PMI_RANK", w.rank)) read("PMIX_RANK", w.rank);
    if (!env("PMI_SIZE")) w.size = w.rank + 1;  // unknown: at least this many
    w.local_size = w.size;
    w.local_rank = w.rank;
    if (!read("MPI_LOCALRANKID", w.local_rank)) read("PMI_LOCAL_RANK", w.local_rank);
    if (!read("MPI_LOCALNRANKS", w.local_size)) read("PMI_LOCAL_SIZE", w.local_size);
    validate(w, env("PMI_RANK") ? "PMI_RANK" : "PMIX_RANK");
    return w;
  }
  return w;
}

bool launched_distributed() { return world_from_env().size > 1; }

}  // namespace kiln::dist
