// Shared by the concat/sum op tests (test_concat_sum.cpp, test_onednn_concat_sum.cpp): ops::cat
// over layouts. The kernels themselves against ref: tests/oracle (ctest -R oracle).
#pragma once

#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/shape.h"
#include "tests/support/testing.h"

namespace kiln::concat_test {

using test::make_input;


// ops::cat under `backend` on NCHW, channels-last and non-contiguous inputs over every dim: each
// input comes back exactly from its slice of the result.
inline void check_cat_layouts(const std::string& b) {
  CAPTURE(b);
  BackendGuard g(b);
  for (int64_t dim : {0, 1, 2, 3})
    for (bool cl : {false, true}) {
      CAPTURE(dim);
      CAPTURE(cl);
      std::vector<Tensor> xs;
      for (int64_t i = 0; i < 3; ++i) {
        Shape s{2, 3, 4, 5};
        s[size_t(dim)] = 1 + i;
        Tensor x = make_input(s, 40 + uint64_t(i), DType::float32);
        xs.push_back(cl ? x.contiguous(MemoryFormat::channels_last) : x);
      }
      if (dim == 2) xs[1] = test::non_contiguous(xs[1]);  // the slice-copy fallback
      Tensor y = ops::cat(xs, dim);
      int64_t off = 0;
      for (const Tensor& x : xs) {
        CHECK_CLOSE(y.narrow(dim, off, x.size(dim)), x, 0, 0);
        off += x.size(dim);
      }
    }
}

}  // namespace kiln::concat_test
