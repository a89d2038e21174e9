// The native inner-product kernels (Linear) on raw pointers with empty dims. Every candidate
// against ref over the problem table: tests/oracle. ops::linear pinned to onednn:
// test_onednn_linear.cpp.
//   ctest --test-dir build -R test_linear_kernels
#include "tests/support/testing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/linalg.h"
#include "kernels/cpu/native/linear.h"

using namespace kiln;
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

