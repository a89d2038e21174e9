// oneDNN's inner-product kernels (Linear): supports() leaving empty and float64 to native;
// ops::linear pinned to onednn against ref (outputs and gradients), with oneDNN really running.
// The kernels against ref over the problem table: tests/oracle. Skipped when kiln was built without oneDNN; fails then under
// CI=true (tools/install-deps.sh --all installs libdnnl-dev).
//   ctest --test-dir build -R test_onednn_linear
#include "tests/support/testing.h"

#ifdef KILN_HAVE_ONEDNN

#include "engine/dispatch.h"
#include "engine/ops/linalg.h"
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/linear.h"

using namespace kiln;
using kiln::test::make_input;

TEST_CASE("onednn linear kernels: supports() scope") {
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

#else  // !KILN_HAVE_ONEDNN

TEST_CASE("onednn linear kernels") {
  kiln::test::skip_missing("oneDNN", "kiln was built without oneDNN (libdnnl-dev not found or KILN_WITH_ONEDNN=OFF)");
}

#endif
