// oneDNN's concat and sum: supports() leaving empty inputs and float64 to native; ops::cat and
// ops::add_n under "onednn,native" against slice copies and ref, oneDNN really running. The
// primitives against ref over the problem table: tests/oracle. Skipped when kiln was built
// without oneDNN; fails then under CI=true (tools/install-deps.sh --all installs libdnnl-dev).
//   ctest --test-dir build -R test_onednn_concat_sum
#include "tests/support/testing.h"

#ifdef KILN_HAVE_ONEDNN

#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/concat.h"
#include "tests/kernels/concat_checks.h"

using namespace kiln;
using namespace kiln::concat_test;

TEST_CASE("onednn concat and sum: supports() scope") {
  ConcatDesc d;
  d.outer = 2, d.inner = 3, d.sizes = {4, 0, 2};
  CHECK_FALSE(onednn::supports_concat(d));  // empty input: native serves it
  SumDesc s;
  s.n = 5, s.inputs = 2, s.dtype = DType::float64;
  CHECK_FALSE(onednn::supports_sum(s));
}

TEST_CASE("ops::cat on onednn: layouts agree with slice copies") {
  const uint64_t before = onednn::stats().executions;
  check_cat_layouts("onednn,native");
  CHECK(onednn::stats().executions > before);
}

TEST_CASE("ops::add_n on onednn vs ref, with gradients") {
  const test::Fn f = [](const std::vector<Tensor>& in) { return ops::add_n(in); };
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < 4; ++i) xs.push_back(make_input({3, 5, 2, 2}, 50 + uint64_t(i)).requires_grad_(true));
  test::RefCompareOptions o;
  o.backend = "onednn,native";
  const uint64_t before = onednn::stats().executions;
  CHECK_AGAINST_REF(f, xs, o);
  CHECK(onednn::stats().executions > before);
}

#else  // !KILN_HAVE_ONEDNN

TEST_CASE("onednn concat and sum") {
  kiln::test::skip_missing("oneDNN", "kiln was built without oneDNN (libdnnl-dev not found or KILN_WITH_ONEDNN=OFF)");
}

#endif
