// The n-ary ops, concat and sum (kernels/common/concat.h): native sum in place (dst == srcs[0]),
// ops::cat on NCHW, channels-last, mixed-layout and non-contiguous inputs on ref and native (the
// one-call path and the slice copies must agree), and ops::add_n against ref with gradients.
// The kernels against ref over the problem table: tests/oracle. oneDNN's: test_onednn_concat_sum.cpp.
//   ctest --test-dir build -R test_concat_sum
#include "tests/support/testing.h"

#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"
#include "kernels/cpu/native/concat.h"
#include "tests/kernels/concat_checks.h"

using namespace kiln;
using kiln::test::make_input;

using namespace kiln::concat_test;

TEST_CASE("native sum in place: dst == srcs[0]") {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30};
  const void* p[2] = {a.data(), b.data()};
  SumDesc d;
  d.n = 3, d.inputs = 2;
  native::sum(d, p, a.data());
  CHECK(a == std::vector<float>{11, 22, 33});
}

TEST_CASE("ops::cat through the concat op: layouts and backends agree with slice copies") {
  for (const char* b : {"ref", "native"}) check_cat_layouts(b);
}

TEST_CASE("ops::add_n vs ref and its gradient") {
  const test::Fn f = [](const std::vector<Tensor>& in) { return ops::add_n(in); };
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < 4; ++i) xs.push_back(make_input({3, 5, 2, 2}, 50 + uint64_t(i)).requires_grad_(true));
  CHECK_AGAINST_REF(f, xs);
  CHECK_GRAD(f, xs);
  CHECK_GRAD(f, (std::vector<Tensor>{xs[0]}));
  CHECK_THROWS_KILN(ops::add_n({xs[0], make_input({3}, 1)}), "add_n");
}
