// The `gpu` test executable's main: runs the doctest cases only when a CUDA device is usable;
// otherwise prints why ("SKIPPED: ...", the line the CI summary greps) and returns 77, which CTest
// (SKIP_RETURN_CODE) reports as Skipped. A GPU is never required, CI=true or not: CI has none.
//   ctest --test-dir build -L gpu --output-on-failure
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "engine/cuda_runtime.h"
#include "tests/support/testing.h"

int main(int argc, char** argv) {
  if (!kiln::cuda::is_available()) {
    std::printf("SKIPPED: no CUDA device: %s\n", kiln::cuda::no_device_reason().c_str());
    return 77;
  }
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  return ctx.shouldExit() ? rc : kiln::test::exit_code(rc);
}
