// The inner-product kernels (Linear) on raw pointers: native in float32 against ref in float64,
// forward (with and without bias), backward-data and backward-weights (with and without the bias
// gradient, a null weight gradient), on odd and classifier-like shapes, and empty dims. oneDNN's
// kernels and ops::linear pinned to onednn: test_onednn_linear.cpp.
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
#include "tests/kernels/linear_checks.h"

using namespace kiln;
using kiln::test::make_input;

using namespace kiln::linear_test;

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

