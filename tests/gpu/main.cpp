// The `gpu` test executable's main: runs the doctest cases only when a CUDA device is usable;
// otherwise prints why and returns 77, which CTest (SKIP_RETURN_CODE) reports as Skipped.
//   ctest --test-dir build -L gpu --output-on-failure
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "engine/cuda_runtime.h"

int main(int argc, char** argv) {
  if (!kiln::cuda::is_available()) {
    std::printf("no CUDA device: skipping gpu tests (%s)\n", kiln::cuda::no_device_reason().c_str());
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
