// The main of every doctest executable of tests/ (but tests/gpu and tests/mpi, whose mains do the
// same around their own set-up): doctest's exit code, or 77 (CTest: Skipped) when every case
// passed but one skipped for a missing dependency (kiln::test::skip_missing, testing.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/support/testing.h"

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit()) return rc;  // --help, --list-test-cases, ...
  return kiln::test::exit_code(rc);
}
