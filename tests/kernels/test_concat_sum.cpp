// The n-ary kernels, concat and sum (kernels/common/concat.h): native and onednn against ref
// (concat exact; sum in float32 against ref in float64), then ops::cat on NCHW, channels-last,
// mixed-layout and non-contiguous inputs on every backend (the one-call path and the slice
// copies must agree), and ops::add_n against ref with gradients.
//   ctest --test-dir build -R test_concat_sum
#include "tests/support/testing.h"

#include <cmath>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/shape.h"
#include "kernels/cpu/native/concat.h"
#include "kernels/cpu/ref/concat.h"
#ifdef KILN_HAVE_ONEDNN
#include "kernels/cpu/onednn/common.h"
#include "kernels/cpu/onednn/concat.h"
#endif

using namespace kiln;
using kiln::test::make_input;

namespace {

using ConcatFn = void (*)(const ConcatDesc&, const void* const*, void*);
using SumFn = void (*)(const SumDesc&, const void* const*, void*);

void check_concat(ConcatFn f, int64_t outer, int64_t inner, std::vector<int64_t> sizes) {
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

void check_sum(SumFn f, int64_t n, int64_t inputs) {
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
  for (int64_t j = 0; j < n; ++j)
    if (std::abs(got[size_t(j)] - expect[size_t(j)]) > 1e-6 * inputs) {
      FAIL_CHECK("element ", j, " is ", got[size_t(j)], ", expected ", expect[size_t(j)]);
      break;
    }
}

const std::vector<std::vector<int64_t>> kConcat = {{1, 5, 1, 3}, {3, 1, 7, 2, 4}, {2, 9, 1, 64, 128, 32, 32}};

}  // namespace

TEST_CASE("native concat and sum vs ref") {
  for (auto& c : kConcat) check_concat(native::concat, c[0], c[1], std::vector<int64_t>(c.begin() + 2, c.end()));
  check_concat(native::concat, 2, 3, {4, 0, 2});  // an empty input
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 2}, {10000, 3}, {4097, 5}})
    check_sum(native::sum, n, k);
  // In place: dst == srcs[0].
  std::vector<float> a{1, 2, 3}, b{10, 20, 30};
  const void* p[2] = {a.data(), b.data()};
  SumDesc d;
  d.n = 3, d.inputs = 2;
  native::sum(d, p, a.data());
  CHECK(a == std::vector<float>{11, 22, 33});
}

#ifdef KILN_HAVE_ONEDNN
TEST_CASE("onednn concat and sum vs ref") {
  const uint64_t before = onednn::stats().executions;
  for (auto& c : kConcat) check_concat(onednn::concat, c[0], c[1], std::vector<int64_t>(c.begin() + 2, c.end()));
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 2}, {10000, 3}, {4097, 5}})
    check_sum(onednn::sum, n, k);
  CHECK(onednn::stats().executions >= before + kConcat.size() + 4);
  ConcatDesc d;
  d.outer = 2, d.inner = 3, d.sizes = {4, 0, 2};
  CHECK_FALSE(onednn::supports_concat(d));  // empty input: native serves it
  SumDesc s;
  s.n = 5, s.inputs = 2, s.dtype = DType::float64;
  CHECK_FALSE(onednn::supports_sum(s));
}
#endif

TEST_CASE("ops::cat through the concat op: layouts and backends agree with slice copies") {
  std::vector<std::string> backends{"ref", "native"};
#ifdef KILN_HAVE_ONEDNN
  backends.push_back("onednn,native");
#endif
  for (const std::string& b : backends) {
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
}

TEST_CASE("ops::add_n vs ref and its gradient") {
  const test::Fn f = [](const std::vector<Tensor>& in) { return ops::add_n(in); };
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < 4; ++i) xs.push_back(make_input({3, 5, 2, 2}, 50 + uint64_t(i)).requires_grad_(true));
  CHECK_AGAINST_REF(f, xs);
  test::RefCompareOptions o;
#ifdef KILN_HAVE_ONEDNN
  o.backend = "onednn,native";
  CHECK_AGAINST_REF(f, xs, o);
#endif
  CHECK_GRAD(f, xs);
  CHECK_GRAD(f, (std::vector<Tensor>{xs[0]}));
  CHECK_THROWS_KILN(ops::add_n({xs[0], make_input({3}, 1)}), "add_n");
}
