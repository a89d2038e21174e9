// oneDNN's matmul primitive behind the "gemm" op: supports() scope, and ops::matmul pinned to
// onednn against ref. The primitive against ref over transposes, leading dims, batch strides,
// alpha and beta: tests/oracle.
// Without oneDNN the test is Skipped, and fails under CI=true (install-deps --all installs it).
//   ctest --test-dir build -R test_onednn_matmul
#include "tests/support/testing.h"

#ifdef KILN_HAVE_ONEDNN

#include <vector>

#include "engine/ops/linalg.h"
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/matmul.h"

using namespace kiln;
using kiln::test::make_input;

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
