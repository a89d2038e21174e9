// oneDNN's matmul primitive behind the "gemm" op: float32 against ref::gemm in float64 over
// transposes, leading dims wider than the rows, batch strides with gaps, a shared (stride 0)
// operand, alpha and beta; supports() scope; and ops::matmul pinned to onednn against ref.
// Without oneDNN the test is Skipped, and fails under CI=true (install-deps --all installs it).
//   ctest --test-dir build -R test_onednn_matmul
#include "tests/support/testing.h"

#ifdef KILN_HAVE_ONEDNN

#include <cmath>
#include <vector>

#include "engine/ops/linalg.h"
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/matmul.h"
#include "kernels/cpu/ref/gemm.h"

using namespace kiln;
using kiln::test::make_input;

namespace {

struct Case {
  int64_t batch, m, n, k;
  bool ta, tb;
  int64_t pad_ld;     // extra columns in every leading dim
  int64_t gap;        // extra elements between batch entries
  bool shared_b;      // stride_b = 0
  double alpha, beta;
};

void run(const Case& c) {
  GemmDesc d;
  d.trans_a = c.ta, d.trans_b = c.tb, d.m = c.m, d.n = c.n, d.k = c.k, d.batch = c.batch;
  d.lda = (c.ta ? c.m : c.k) + c.pad_ld, d.ldb = (c.tb ? c.k : c.n) + c.pad_ld, d.ldc = c.n + c.pad_ld;
  d.stride_a = (c.ta ? c.k : c.m) * d.lda + c.gap;
  d.stride_b = c.shared_b ? 0 : (c.tb ? c.n : c.k) * d.ldb + c.gap;
  d.stride_c = c.m * d.ldc + c.gap;
  d.alpha = c.alpha, d.beta = c.beta;
  CAPTURE(d.str());
  CAPTURE(c.pad_ld);
  CAPTURE(c.gap);
  CAPTURE(c.shared_b);
  CAPTURE(c.beta);
  REQUIRE(onednn::supports_matmul_any(d));
  CHECK(onednn::supports_matmul(d) == (c.batch > 1));
  const int64_t na = c.batch * d.stride_a, nb = c.shared_b ? (c.tb ? c.n : c.k) * d.ldb : c.batch * d.stride_b,
                nc = c.batch * d.stride_c;
  std::vector<double> a = make_input({na}, 1).to_vector(), b = make_input({nb}, 2).to_vector(),
                      c0 = make_input({nc}, 3).to_vector();
  std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fc(c0.begin(), c0.end());
  std::vector<double> expect = c0;
  GemmDesc d64 = d;
  d64.dtype = DType::float64;
  ref::gemm<double>(d64, a.data(), b.data(), expect.data());
  const uint64_t before = onednn::stats().executions;
  onednn::matmul(d, fa.data(), fb.data(), fc.data());
  CHECK(onednn::stats().executions == before + 1);  // one primitive for the whole batch
  const double tol = 1e-5 * std::sqrt(double(c.k) + 1);
  // Gaps must stay untouched too; a NaN anywhere fails (test::near).
  const int64_t i = test::first_mismatch(test::as_doubles(fc), expect, tol, tol);
  CHECK_MESSAGE(i < 0, "element ", i, " is ", (i >= 0 ? fc[size_t(i)] : 0.f), ", expected ",
                (i >= 0 ? expect[size_t(i)] : 0.0));
}

}  // namespace

TEST_CASE("onednn matmul vs ref gemm: transposes, leading dims, batch strides, alpha, beta") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      run({1, 5, 7, 3, ta, tb, 0, 0, false, 1.0, 0.0});
      run({4, 6, 5, 9, ta, tb, 0, 0, false, 1.0, 0.0});
      run({3, 17, 33, 65, ta, tb, 2, 5, false, 1.0, 0.0});
      run({3, 4, 6, 5, ta, tb, 1, 0, true, 1.0, 0.0});
      run({2, 4, 3, 8, ta, tb, 0, 3, false, 0.5, 1.0});
      run({2, 4, 3, 8, ta, tb, 0, 0, false, 1.0, -2.0});
    }
}

TEST_CASE("onednn matmul: supports() scope") {
  GemmDesc d;
  d.m = 2, d.n = 3, d.k = 4, d.lda = 4, d.ldb = 3, d.ldc = 3, d.batch = 2, d.stride_a = 8, d.stride_b = 12,
  d.stride_c = 6;
  CHECK(onednn::supports_matmul(d));
  d.dtype = DType::float64;
  CHECK_FALSE(onednn::supports_matmul(d));
  d.dtype = DType::float32;
  d.stride_a = 3;  // batch entries overlap
  CHECK_FALSE(onednn::supports_matmul(d));
}

TEST_CASE("ops::matmul on onednn vs ref: batched, transposed views, gradients") {
  test::RefCompareOptions o;
  o.backend = "onednn,native";
  const test::Fn mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  Tensor a = make_input({4, 5, 3}, 1).requires_grad_(true), b = make_input({4, 3, 6}, 2).requires_grad_(true);
  const uint64_t before = onednn::stats().executions;
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{a, b}), o);
  CHECK(onednn::stats().executions > before);
  Tensor at = make_input({4, 3, 5}, 3).transpose(1, 2).requires_grad_(true);
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{at, b}), o);
  CHECK_AGAINST_REF(mm, (std::vector<Tensor>{a, make_input({3, 6}, 4).requires_grad_(true)}), o);
}

#else  // !KILN_HAVE_ONEDNN

TEST_CASE("onednn matmul") {
  kiln::test::skip_missing("oneDNN", "kiln was built without oneDNN (libdnnl-dev not found or KILN_WITH_ONEDNN=OFF)");
}

#endif
