// Fault drill: the last rank stops itself (SIGSTOP: alive and silent, so mpirun notices nothing).
// The others' allreduce times out after 2 s with an error naming it, and dist::abort ends the job
// (MPI_Abort: the launcher kills every rank, the stopped one too). CTest checks the message and
// that the job ends (TIMEOUT 60); the exit status is MPI_Abort's, nonzero by design.
//   ctest --test-dir build -R mpi.frozen_rank
#include <csignal>
#include <cstdio>

#include "dist/comm.h"

using namespace kiln;

int main() {
  dist::init();
  dist::CommOptions o;
  o.timeout_s = 2;
  o.warn_after_s = 1;
  auto comm = dist::make_communicator("mpi", o);
  comm->barrier("start");
  if (comm->rank() == comm->size() - 1) std::raise(SIGSTOP);
  try {
    Tensor g = full({1000}, 1.0);
    comm->allreduce(g, dist::ReduceOp::average, "grad");
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    dist::abort(3);
  }
  dist::finalize();
  return 0;
}
