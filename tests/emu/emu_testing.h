// Helpers shared by the emu tests: seeded random data for the kernels under the emulator, and
// the relative comparison their kernels are judged by (NaN-aware: tests/support/testing.h near).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/testing.h"

namespace kiln::emu_test {

// n values uniform in [lo, hi) from a fixed seed.
inline std::vector<double> rnd(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(g);
  return v;
}

// "" when every |a[i] - b[i]| / (1 + |b[i]|) <= tol, else `what` with the worst element. A NaN in
// `b` must be matched by a NaN in `a` (the ref's 0/0 rules); a NaN or infinity in `a` where `b`
// is finite is the worst element there is (test::abs_diff).
template <class T>
std::string near_message(const std::vector<T>& a, const std::vector<double>& b, double tol, const std::string& what) {
  if (a.size() != b.size())
    return what + ": " + std::to_string(a.size()) + " elements, expected " + std::to_string(b.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = test::abs_diff(double(a[i]), b[i]);
    const double e = std::isfinite(b[i]) ? d / (1 + std::abs(b[i])) : d;
    if (e > worst) worst = e, at = i;  // e is never NaN
  }
  if (worst <= tol) return "";
  std::ostringstream os;
  os << what << ": worst relative error " << worst << " at " << at << " (" << double(a[at]) << " vs " << b[at]
     << "), tolerance " << tol;
  return os.str();
}

template <class T>
void check_near(const std::vector<T>& a, const std::vector<double>& b, double tol, const std::string& what) {
  const std::string m = near_message(a, b, tol, what);
  CHECK_MESSAGE(m.empty(), m);
}

}  // namespace kiln::emu_test
