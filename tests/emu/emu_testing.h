// Helpers shared by the emu tests: seeded random data for the kernels under the emulator.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::emu_test {

// n values uniform in [lo, hi) from a fixed seed.
inline std::vector<double> rnd(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(g);
  return v;
}

}  // namespace kiln::emu_test
