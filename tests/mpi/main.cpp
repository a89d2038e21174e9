// The `mpi` test executable's main: every rank runs the same doctest cases in the same order,
// between dist::init() (MPI_Init_thread under mpirun) and dist::finalize(). A failed CHECK on any
// rank makes that rank exit nonzero, so mpirun (and the CTest test) fails.
//   ctest --test-dir build -L mpi --output-on-failure
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "dist/comm.h"
#include "tests/support/testing.h"

int main(int argc, char** argv) {
  kiln::dist::init();
  int rc;
  {
    doctest::Context ctx(argc, argv);
    rc = ctx.run();
    if (!ctx.shouldExit()) rc = kiln::test::exit_code(rc);
  }
  kiln::dist::finalize();
  return rc;
}
