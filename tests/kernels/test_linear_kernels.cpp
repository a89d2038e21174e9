// The inner-product kernels (Linear) on raw pointers: native and onednn in float32 against ref in
// float64, forward (with and without bias), backward-data and backward-weights (with and
// without the bias gradient, a null weight gradient), on odd and classifier-like shapes; then
// ops::linear pinned to onednn against ref (outputs and gradients), with oneDNN really running.
//   ctest --test-dir build -R test_linear_kernels
#include "tests/support/testing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/linalg.h"
#include "kernels/cpu/native/linear.h"
#include "kernels/cpu/ref/linear.h"
#ifdef KILN_HAVE_ONEDNN
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/linear.h"
#endif

using namespace kiln;
using kiln::test::make_input;

namespace {

std::vector<double> doubles(int64_t n, uint64_t seed) { return make_input({n}, seed).to_vector(); }
std::vector<float> to_f(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Worst |a - e| / (atol + rtol |e|) > 1 fails.
void check_close(const std::vector<float>& a, const std::vector<double>& e, double tol, const char* what) {
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(double(a[i]) - e[i]) > tol * (1 + std::abs(e[i]))) {
      FAIL_CHECK(what, ": element ", i, " is ", a[i], ", expected ", e[i]);
      return;
    }
}

using Fwd = void (*)(const LinearDesc&, const void*, const void*, const void*, void*);
using BwdD = void (*)(const LinearDesc&, const void*, const void*, void*);
using BwdW = void (*)(const LinearDesc&, const void*, const void*, void*, void*);

void run_case(const char* backend, bool (*supports)(const LinearDesc&), Fwd fwd, BwdD bwd_data, BwdW bwd_weights,
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

const std::vector<std::array<int64_t, 3>> kShapes = {{1, 1, 1}, {5, 3, 4}, {7, 33, 17}, {16, 300, 70}, {3, 129, 1}};

}  // namespace

TEST_CASE("native linear kernels vs ref") {
  for (auto [n, ic, oc] : kShapes)
    for (bool bias : {true, false})
      run_case("native", native::supports_linear, native::linear_fwd, native::linear_bwd_data,
               native::linear_bwd_weights, n, ic, oc, bias);
}

TEST_CASE("native linear kernels: empty dims") {
  LinearDesc d;
  d.n = 3, d.ic = 0, d.oc = 2, d.has_bias = true;
  std::vector<float> b{1.f, 2.f}, o(6, -7.f), dd(6, 1.f), dw, db(2, -7.f);
  native::linear_fwd(d, nullptr, nullptr, b.data(), o.data());
  CHECK(o == std::vector<float>{1, 2, 1, 2, 1, 2});
  native::linear_bwd_weights(d, nullptr, dd.data(), nullptr, db.data());
  CHECK(db == std::vector<float>{3, 3});
  d.n = 0, d.ic = 2;
  std::vector<float> dw2(4, -7.f);
  native::linear_bwd_weights(d, nullptr, nullptr, dw2.data(), nullptr);
  CHECK(dw2 == std::vector<float>(4, 0.f));
}

#ifdef KILN_HAVE_ONEDNN
TEST_CASE("onednn linear kernels vs ref") {
  const uint64_t before = onednn::stats().executions;
  for (auto [n, ic, oc] : kShapes)
    for (bool bias : {true, false})
      run_case("onednn", onednn::supports_linear, onednn::linear_fwd, onednn::linear_bwd_data,
               onednn::linear_bwd_weights, n, ic, oc, bias);
  CHECK(onednn::stats().executions > before);
  LinearDesc d;
  d.n = 0, d.ic = 3, d.oc = 2;
  CHECK_FALSE(onednn::supports_linear(d));  // empty: native serves it
  d.n = 2, d.dtype = DType::float64;
  CHECK_FALSE(onednn::supports_linear(d));
}

TEST_CASE("ops::linear on onednn vs ref: outputs and gradients") {
  const test::Fn lin = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); };
  const test::Fn lin_nb = [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1]); };
  test::RefCompareOptions o;
  o.backend = "onednn,native";
  o.rtol = 1e-4;
  o.atol = 1e-4;
  for (Shape xs : {Shape{5, 3}, Shape{2, 3, 3}, Shape{37, 3}}) {
    CAPTURE(shape_str(xs));
    Tensor x = make_input(xs, 16).requires_grad_(true), w = make_input({4, 3}, 17).requires_grad_(true),
           b = make_input({4}, 18).requires_grad_(true);
    const uint64_t before = onednn::stats().executions;
    CHECK_AGAINST_REF(lin, (std::vector<Tensor>{x, w, b}), o);
    CHECK(onednn::stats().executions >= before + 3);  // forward, backward-data, backward-weights
    CHECK_AGAINST_REF(lin_nb, (std::vector<Tensor>{x, w}), o);
    CHECK_AGAINST_REF(lin, (std::vector<Tensor>{x.detach(), w, b}), o);                 // no input gradient
    CHECK_AGAINST_REF(lin, (std::vector<Tensor>{x, w.detach(), b}), o);                 // no weight gradient
    CHECK_AGAINST_REF(lin, (std::vector<Tensor>{test::non_contiguous(x.detach()), w, b}), o);
  }
}
#endif
