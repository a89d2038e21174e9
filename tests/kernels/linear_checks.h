// Shared by the inner-product kernel tests (test_linear_kernels.cpp, test_onednn_linear.cpp): a
// backend's forward, backward-data and backward-weights kernels in float32 against ref in float64.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/linear.h"
#include "tests/support/testing.h"

namespace kiln::linear_test {

using test::make_input;

inline std::vector<double> doubles(int64_t n, uint64_t seed) { return make_input({n}, seed).to_vector(); }
inline std::vector<float> to_f(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Fails when any |a - e| > tol * (1 + |e|) (test::near: a NaN or infinity fails too).
inline void check_close(const std::vector<float>& a, const std::vector<double>& e, double tol, const char* what) {
  REQUIRE(a.size() == e.size());
  const int64_t i = test::first_mismatch(test::as_doubles(a), e, tol, tol);
  if (i >= 0) FAIL_CHECK(what, ": element ", i, " is ", a[size_t(i)], ", expected ", e[size_t(i)]);
}

using Fwd = void (*)(const LinearDesc&, const void*, const void*, const void*, void*);
using BwdD = void (*)(const LinearDesc&, const void*, const void*, void*);
using BwdW = void (*)(const LinearDesc&, const void*, const void*, void*, void*);

inline void run_case(const char* backend, bool (*supports)(const LinearDesc&), Fwd fwd, BwdD bwd_data, BwdW bwd_weights,
              int64_t n, int64_t ic, int64_t oc, bool bias) {
  CAPTURE(backend);
  LinearDesc d;
  d.n = n, d.ic = ic, d.oc = oc, d.has_bias = bias;
  CAPTURE(d.str());
  REQUIRE(supports(d));
  const auto src = doubles(n * ic, 1), wei = doubles(oc * ic, 2), b = doubles(oc, 3), dd = doubles(n * oc, 4);
  const auto fs = to_f(src), fw = to_f(wei), fb = to_f(b), fdd = to_f(dd);
  LinearDesc d64 = d;
  d64.dtype = DType::float64;
  // Sums of up to ic or n products of values in [-1, 1): float32 rounding grows like sqrt(terms).
  const double tol = 2e-5 * std::sqrt(double(std::max(ic, n)) + 1);

  std::vector<double> dst(n * oc), dsrc(n * ic), dwei(oc * ic), dbias(oc);
  ref::linear_fwd<double>(d64, src.data(), wei.data(), b.data(), dst.data());
  ref::linear_bwd_data<double>(d64, dd.data(), wei.data(), dsrc.data());
  ref::linear_bwd_weights<double>(d64, src.data(), dd.data(), dwei.data(), dbias.data());

  std::vector<float> o(n * oc, -7.f), ds(n * ic, -7.f), dw(oc * ic, -7.f), db(oc, -7.f);
  fwd(d, fs.data(), fw.data(), bias ? fb.data() : nullptr, o.data());
  check_close(o, dst, tol, "forward");
  bwd_data(d, fdd.data(), fw.data(), ds.data());
  check_close(ds, dsrc, tol, "backward-data");
  bwd_weights(d, fs.data(), fdd.data(), dw.data(), bias ? db.data() : nullptr);
  check_close(dw, dwei, tol, "backward-weights");
  if (bias) check_close(db, dbias, tol, "bias gradient");
  // Only the bias gradient wanted.
  std::fill(db.begin(), db.end(), -7.f);
  bwd_weights(d, fs.data(), fdd.data(), nullptr, db.data());
  check_close(db, dbias, tol, "bias gradient alone");
}

inline const std::vector<std::array<int64_t, 3>> kShapes = {{1, 1, 1}, {5, 3, 4}, {7, 33, 17}, {16, 300, 70}, {3, 129, 1}};

}  // namespace kiln::linear_test
