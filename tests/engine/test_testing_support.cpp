// The test helpers themselves. Every comparison helper of tests/ fails on a planted NaN or
// infinity where the reference is finite: test::near / abs_diff / first_mismatch / max_abs_diff /
// max_rel_diff, compare (CHECK_CLOSE), against_ref (output and gradient), gradcheck, the emu
// tests' near_message, the GPU op harness's side_mismatch and rel_diff (built here with
// KILN_GPUTEST_ON_CPU), the distributed checks of tests/mpi (first_mismatch, max_state_diff) and
// the ONNX tests' max_diff. gradcheck runs on the backend it names. A missing dependency makes a
// test Skipped (exit 77, "SKIPPED: ..."), a failure under CI=true, and never hides a failure: the
// drills run this executable again as a child process.
//   ctest --test-dir build -R engine.test_testing_support
#define KILN_GPUTEST_ON_CPU  // tests/gpu's harness with its "GPU" side on the CPU
#include "tests/support/testing.h"

#include <unistd.h>

#include <cmath>
#include <limits>

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "layers/linear.h"
#include "tests/e2e/onnx_testing.h"
#include "tests/emu/emu_testing.h"
#include "tests/gpu/op_harness.h"
#include "tests/mpi/mpi_testing.h"

using namespace kiln;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// `want` with element i replaced by v.
std::vector<double> planted(std::vector<double> want, size_t i, double v) {
  want[i] = v;
  return want;
}

Tensor planted(const Tensor& t, int64_t i, double v) {
  Tensor c = t.detach().clone();
  std::vector<double> x = c.to_vector();
  x[size_t(i)] = v;
  return from_vector(x, c.sizes(), TensorOptions(c.dtype()));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("near and the vector helpers: a NaN or infinity where the reference is finite fails") {
  CHECK(test::near(1.0, 1.0 + 1e-9, 1e-6));
  CHECK_FALSE(test::near(kNaN, 1.0, 1e-6));
  CHECK_FALSE(test::near(kInf, 1.0, 1e30));
  CHECK_FALSE(test::near(-kInf, 1.0, kInf));  // even with an infinite tolerance
  CHECK_FALSE(test::near(1.0, kNaN, 1e-6));   // a finite value where the reference is NaN
  CHECK(test::near(kNaN, kNaN, 0));           // NaN matches NaN (0/0 rules), inf the same inf
  CHECK(test::near(kInf, kInf, 0));
  CHECK_FALSE(test::near(-kInf, kInf, 0));
  CHECK(test::abs_diff(kNaN, 2) == kInf);
  CHECK(test::abs_diff(kNaN, kNaN) == 0);
  CHECK(test::abs_diff(3, 1) == 2);

  const std::vector<double> want = {0.5, -1, 2, 0, 4};
  CHECK(test::first_mismatch(want, want, 0, 0) == -1);
  CHECK(test::max_abs_diff(want, want) == 0);
  CHECK(test::max_rel_diff(want, want) == 0);
  for (size_t i : {size_t(0), size_t(2), want.size() - 1}) {  // first, middle (finite ones after it), last
    CAPTURE(i);
    for (double bad : {kNaN, kInf, -kInf}) {
      CAPTURE(bad);
      const std::vector<double> got = planted(want, i, bad);
      CHECK(test::first_mismatch(got, want, 1e-3, 1e-3) == int64_t(i));
      CHECK(test::max_abs_diff(got, want) == kInf);
      CHECK(test::max_rel_diff(got, want) == kInf);
    }
  }
  CHECK(test::first_mismatch({1, 2}, {1, 2, 3}, 0, 0) == 2);  // a size mismatch
  CHECK(test::max_abs_diff({1, 2}, {1, 2, 3}) == kInf);
  CHECK(test::max_rel_diff({1, 2.5}, {1, 2}) == doctest::Approx(0.5 / 3));
}

TEST_CASE("compare (CHECK_CLOSE) reports a planted NaN or infinity in the actual tensor") {
  const Tensor want = test::make_input({3, 4}, 1);
  CHECK(test::compare(want, want, 0, 0).empty());
  for (double bad : {kNaN, kInf}) {
    CAPTURE(bad);
    const std::string m = test::compare(planted(want, 5, bad), want, 1e-3, 1e-3);
    CHECK(contains(m, "1 of 12 elements differ"));
    CHECK(contains(m, "worst at flat index 5"));
  }
  // A NaN before a large finite error still counts, and is the worst element.
  Tensor got = planted(planted(want, 2, kNaN), 7, 100);
  CHECK(contains(test::compare(got, want, 1e-3, 1e-3), "2 of 12 elements differ"));
  CHECK(contains(test::compare(got, want, 1e-3, 1e-3), "worst at flat index 2"));
  // NaN where the reference is NaN matches (the ops' 0/0 rules).
  CHECK(test::compare(planted(want, 3, kNaN), planted(want, 3, kNaN), 0, 0).empty());
}

TEST_CASE("against_ref fails on a NaN planted in the output or the gradient of the tested backend") {
  const Tensor x = test::make_input({2, 5}, 2).requires_grad_(true);
  const test::Fn clean = [](const std::vector<Tensor>& in) { return ops::mul(in[0], 3.0); };
  CHECK(test::against_ref(clean, {x}).empty());
  // The output: a NaN only where the backend under test runs.
  const test::Fn nan_out = [](const std::vector<Tensor>& in) {
    Tensor y = ops::mul(in[0], 3.0);
    if (contains(backend_preference(), "native")) y = ops::add(y, planted(zeros_like(y), 4, kNaN));
    return y;
  };
  CHECK(contains(test::against_ref(nan_out, {x}), "output (native vs ref): 1 of 10 elements differ"));
  // The gradient: sqrt(0 * x) adds 0 to the output and 0 * (1 / 0) = NaN to every input gradient.
  const test::Fn nan_grad = [](const std::vector<Tensor>& in) {
    Tensor y = ops::mul(in[0], 3.0);
    if (contains(backend_preference(), "native")) y = ops::add(y, ops::sqrt(ops::mul(in[0], 0.0)));
    return y;
  };
  CHECK(contains(test::against_ref(nan_grad, {x}), "gradient of input 0 (native vs ref)"));
}

TEST_CASE("gradcheck fails on a NaN gradient and runs on the backend it names") {
  const Tensor x = test::make_input({4}, 3, DType::float64, 0.5, 1.5).requires_grad_(true);
  const test::Fn square = [](const std::vector<Tensor>& in) { return ops::mul(in[0], in[0]); };
  CHECK(test::gradcheck(square, {x}).empty());
  // Finite differences of x + sqrt(0 * x) are 1; backward gives NaN.
  const test::Fn nan_grad = [](const std::vector<Tensor>& in) {
    return ops::add(in[0], ops::sqrt(ops::mul(in[0], 0.0)));
  };
  const std::string m = test::gradcheck(nan_grad, {x});
  CHECK_MESSAGE(contains(m, "gradcheck (ref): input 0 [4] element 0: analytic "), m);
  CHECK_MESSAGE(contains(m, "nan, numeric "), m);  // the numeric side: the output weight, finite
  // A wrong gradient is found on either backend.
  for (const char* b : {"ref", "native"}) {
    CAPTURE(b);
    std::string seen;
    const test::Fn spy = [&](const std::vector<Tensor>& in) {
      seen = backend_preference();
      return ops::mul(in[0], in[0]);
    };
    test::GradcheckOptions o;
    o.backend = b;
    CHECK(test::gradcheck(spy, {x}, o).empty());
    CHECK(seen == std::string(b) + " (strict)");  // f ran pinned to that backend, no fallback
  }
}

TEST_CASE("the emu tests' near_message: a NaN before finite elements is not forgotten") {
  const std::vector<double> want = {1, 2, 3, 4};
  CHECK(emu_test::near_message(want, want, 0, "x").empty());
  CHECK(emu_test::near_message(std::vector<float>{1, 2, 3, 4}, want, 0, "x").empty());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    for (double bad : {kNaN, kInf}) {
      const std::string m = emu_test::near_message(planted(want, i, bad), want, 1e-3, "dst");
      CHECK(contains(m, "dst: worst relative error inf at " + std::to_string(i)));
    }
    // float data: the NaN survives the conversion too.
    std::vector<float> f(want.begin(), want.end());
    f[i] = std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(emu_test::near_message(f, want, 1e-3, "dst").empty());
  }
  CHECK(emu_test::near_message(planted(want, 1, kNaN), planted(want, 1, kNaN), 0, "x").empty());  // ref's 0/0
  CHECK(contains(emu_test::near_message(std::vector<double>{1, 2}, want, 0, "x"), "2 elements, expected 4"));
}

TEST_CASE("the GPU op harness: side_mismatch and rel_diff see a planted NaN") {
  gputest::OpCase c;
  c.name = "mul";
  c.inputs = {gputest::in({2, 3}, 1)};
  c.fn = [](gputest::V x) { return gputest::Outs{ops::mul(x[0], x[0])}; };
  gputest::Side want, got;
  {
    BackendGuard g("ref");
    want = gputest::run_side(c, {Device(), DType::float64, DType::float64, DType::float32});
  }
  got = want;
  CHECK(gputest::side_mismatch(c, got, want).empty());
  got.outs[0] = planted(want.outs[0], 4, kNaN);
  CHECK(contains(gputest::side_mismatch(c, got, want), "output 0: 1 of 6 elements differ"));
  got = want;
  got.grads[0] = planted(want.grads[0], 0, kInf);
  CHECK(contains(gputest::side_mismatch(c, got, want), "gradient of the 0-th input that requires grad"));
  CHECK(gputest::rel_diff(want.outs[0], want.outs[0]) == 0);
  CHECK(gputest::rel_diff(planted(want.outs[0], 4, kNaN), want.outs[0]) == kInf);
  CHECK(gputest::rel_diff(planted(want.outs[0], 4, kInf), want.outs[0]) == kInf);
}

TEST_CASE("the distributed checks of tests/mpi: first_mismatch and max_state_diff see a planted NaN") {
  const std::vector<double> want = {1, -2, 3};
  CHECK(test::first_mismatch(want, want, 1e-6) == -1);
  CHECK(test::first_mismatch(planted(want, 0, kNaN), want, 1e-6) == 0);
  CHECK(test::first_mismatch(planted(want, 2, kInf), want, 1e-6) == 2);
  manual_seed(3);
  Linear a(4, 3), b(4, 3);
  b.load_state_dict(a.state_dict(), true);
  CHECK(test::max_state_diff(a, b) == 0);
  {
    NoGradGuard ng;
    b.weight().data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  }
  CHECK(test::max_state_diff(a, b) == kInf);
  CHECK(test::max_state_diff(b, a) == kInf);
}

TEST_CASE("the ONNX tests' max_diff and max_abs see a planted NaN") {
  const std::vector<float> want = {0.25f, -1.f, 2.f};
  CHECK(onnx_test::max_diff(want, want) == 0);
  std::vector<float> got = want;
  got[0] = std::numeric_limits<float>::quiet_NaN();
  CHECK(onnx_test::max_diff(got, want) == kInf);
  CHECK(onnx_test::max_abs(got) == kInf);
  CHECK(onnx_test::max_abs(want) == 2);
  CHECK(onnx_test::max_diff({1.f}, want) == kInf);
}

// ---- Skipping ------------------------------------------------------------------------------------
// The drills below are skipped in a normal run; the test after them runs this executable again
// with --no-skip on one of them and checks its exit code and output.

TEST_CASE("skip drill: a missing dependency" * doctest::skip()) {
  CHECK(1 + 1 == 2);
  test::skip_missing("drill-dependency", "planted by test_testing_support.cpp");
}

TEST_CASE("skip drill: a missing dependency and a failure" * doctest::skip()) {
  test::skip_missing("drill-dependency", "planted by test_testing_support.cpp");
  CHECK_MESSAGE(false, "planted failure");
}

namespace {
// Runs this executable's case `name` (skipped ones included) with CI=`ci` ("": unset).
std::string run_drill(const std::string& name, const std::string& ci, int* rc) {
  const std::string env = ci.empty() ? "env -u CI " : "env CI=" + ci + " ";
  return test::run_capture(env + test::self_command() + " --no-skip --no-intro " +
                               test::shell_quote("--test-case=" + name) + " 2>&1",
                           rc);
}
}  // namespace

TEST_CASE("a missing dependency: Skipped (77) with its reason, a failure under CI=true, never a pass") {
  int rc = 0;
  std::string out = run_drill("skip drill: a missing dependency", "", &rc);
  CHECK_MESSAGE(rc == 77, out);
  const std::string line = "SKIPPED: drill-dependency: planted by test_testing_support.cpp\n";
  CHECK_MESSAGE((contains(out, "\n" + line) || out.rfind(line, 0) == 0), out);  // a line of its own
  out = run_drill("skip drill: a missing dependency", "false", &rc);  // only "true" means CI
  CHECK_MESSAGE(rc == 77, out);
  out = run_drill("skip drill: a missing dependency", "true", &rc);
  CHECK_MESSAGE(rc == 1, out);
  CHECK(contains(out, "MISSING (required with CI=true): drill-dependency: planted by test_testing_support.cpp"));
  CHECK_FALSE(contains(out, "SKIPPED:"));
  // A skip never hides a failure of the same process.
  out = run_drill("skip drill: a missing dependency and a failure", "", &rc);
  CHECK_MESSAGE(rc == 1, out);
  CHECK(contains(out, "planted failure"));
}

TEST_CASE("tests/support/skip.sh: 77 with SKIPPED, or 1 with MISSING under CI=true") {
  const std::string sh = "bash '" KILN_SOURCE_DIR "/tests/support/skip.sh' lua5.4 'no Lua here' 2>&1";
  int rc = 0;
  std::string out = test::run_capture("env -u CI " + sh, &rc);
  CHECK(rc == 77);
  CHECK(out == "SKIPPED: lua5.4: no Lua here\n");
  out = test::run_capture("env CI=true " + sh, &rc);
  CHECK(rc == 1);
  CHECK(out == "MISSING (required with CI=true): lua5.4: no Lua here\n");
}

TEST_CASE("need_python and need_path name what is missing") {
  // Only the found side: the missing side would mark this process skipped (the drills cover it).
  CHECK(test::need_path(KILN_SOURCE_DIR "/tests/support/testing.h", "source", "unused"));
  CHECK(test::shell_quote("it's") == "'it'\\''s'");
  int rc = 0;
  CHECK(test::run_capture("echo " + test::shell_quote("a b'c"), &rc) == "a b'c\n");
  CHECK(rc == 0);
  test::run_capture("exit 3", &rc);
  CHECK(rc == 3);
}
