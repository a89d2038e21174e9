// Shared by the concat/sum kernel tests (test_concat_sum.cpp, test_onednn_concat_sum.cpp): a
// kernel against ref::concat (exact) and ref::sum (float32 against float64), on raw pointers.
#pragma once

#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/shape.h"
#include "kernels/cpu/ref/concat.h"
#include "tests/support/testing.h"

namespace kiln::concat_test {

using test::make_input;


using ConcatFn = void (*)(const ConcatDesc&, const void* const*, void*);
using SumFn = void (*)(const SumDesc&, const void* const*, void*);

inline void check_concat(ConcatFn f, int64_t outer, int64_t inner, std::vector<int64_t> sizes) {
  ConcatDesc d;
  d.outer = outer, d.inner = inner, d.sizes = sizes;
  CAPTURE(d.str());
  std::vector<std::vector<float>> ins;
  std::vector<const void*> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<double> v = make_input({outer * sizes[i] * inner}, 10 + i).to_vector();
    ins.emplace_back(v.begin(), v.end());
  }
  for (auto& v : ins) ptrs.push_back(v.data());
  std::vector<float> expect(size_t(outer * d.total() * inner)), got(expect.size(), -7.f);
  ref::concat<float>(d, ptrs.data(), expect.data());
  f(d, ptrs.data(), got.data());
  CHECK(got == expect);
}

inline void check_sum(SumFn f, int64_t n, int64_t inputs) {
  SumDesc d;
  d.n = n, d.inputs = inputs;
  CAPTURE(d.str());
  std::vector<std::vector<double>> ins64;
  std::vector<std::vector<float>> ins;
  std::vector<const void*> p64, p32;
  for (int64_t i = 0; i < inputs; ++i) {
    ins64.push_back(make_input({n}, 20 + uint64_t(i)).to_vector());
    ins.emplace_back(ins64.back().begin(), ins64.back().end());
  }
  for (auto& v : ins64) p64.push_back(v.data());
  for (auto& v : ins) p32.push_back(v.data());
  SumDesc d64 = d;
  d64.dtype = DType::float64;
  std::vector<double> expect(static_cast<size_t>(n));
  ref::sum<double>(d64, p64.data(), expect.data());
  std::vector<float> got(static_cast<size_t>(n), -7.f);
  f(d, p32.data(), got.data());
  // Float32 sums of `inputs` values in [-1, 1): within 1e-6 per input (test::near: a NaN fails).
  const int64_t j = test::first_mismatch(test::as_doubles(got), expect, 0, 1e-6 * double(inputs));
  CHECK_MESSAGE(j < 0, "element ", j, " is ", (j >= 0 ? got[size_t(j)] : 0.f), ", expected ",
                (j >= 0 ? expect[size_t(j)] : 0.0));
}

inline const std::vector<std::vector<int64_t>> kConcat = {{1, 5, 1, 3}, {3, 1, 7, 2, 4}, {2, 9, 1, 64, 128, 32, 32}};

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
