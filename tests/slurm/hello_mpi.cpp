// hello_mpi: the job the SLURM test launches (tests/slurm/run.sh). Each rank all-reduces its
// rank and prints one line, "rank R of N sum S procid P localid L", which the test matches:
// every rank must see the same size and the sum 0 + 1 + ... + N-1, so the ranks really were wired
// together by SLURM's PMI, not started as N singletons (those would each print "rank 0 of 1").
// Run: ctest --test-dir build -R slurm   (or tests/slurm/run.sh -- build/tests/kiln_slurm_hello)
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "hello_mpi: MPI_Init failed\n");
    return 1;
  }
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long sum = 0;
  long mine = rank;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d sum %ld procid %s localid %s\n", rank, size, sum,
              env_or("SLURM_PROCID", "-"), env_or("SLURM_LOCALID", "-"));
  std::fflush(stdout);
  MPI_Finalize();
  return sum == static_cast<long>(size) * (size - 1) / 2 ? 0 : 1;
}
