// kiln's own CUDA concat and n-ary sum (kernels/cuda/native/concat.cu) under the emulator, against
// the ref kernels, bit for bit: concat moves bits, and the sum adds in the same order as ref.
//   ctest --test-dir build -R emu.test_concat
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/ref/concat.h"
#include "kernels/cuda/native/concat.h"

namespace kiln {
namespace {

template <class T>
std::vector<T> values(int64_t n, int seed) {
  std::vector<T> v(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = T(((i * 37 + seed * 11) % 101) * 0.37 - 17.5 + seed * 0.001);
  return v;
}

template <class T>
void check_concat(int64_t outer, int64_t inner, const std::vector<int64_t>& sizes, DType dt) {
  ConcatDesc d;
  d.dtype = dt;
  d.outer = outer;
  d.inner = inner;
  d.sizes = sizes;
  std::vector<std::vector<T>> in;
  std::vector<const void*> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    in.push_back(values<T>(outer * sizes[i] * inner, int(i)));
    ptrs.push_back(in.back().data());
  }
  const size_t n = size_t(outer * d.total() * inner);
  std::vector<T> want(n), got(n, T(-999));
  ref::concat<T>(d, ptrs.data(), want.data());
  REQUIRE(cuda::supports_concat(d));
  cuda::concat(d, ptrs.data(), got.data());
  CHECK(std::memcmp(want.data(), got.data(), n * sizeof(T)) == 0);
}

template <class T>
void check_sum(int64_t n, int64_t inputs, DType dt) {
  SumDesc d;
  d.dtype = dt;
  d.n = n;
  d.inputs = inputs;
  std::vector<std::vector<T>> in;
  std::vector<const void*> ptrs;
  for (int64_t i = 0; i < inputs; ++i) {
    in.push_back(values<T>(n, int(i) + 3));
    ptrs.push_back(in.back().data());
  }
  std::vector<T> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), T(-999));
  ref::sum<T>(d, ptrs.data(), want.data());
  REQUIRE(cuda::supports_sum(d));
  cuda::sum(d, ptrs.data(), got.data());
  CHECK(std::memcmp(want.data(), got.data(), size_t(n) * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("emu: CUDA concat equals ref (NCHW channel blocks, channels-last rows, empty inputs, 1-8 byte types)") {
  for (int64_t outer : {1, 3})
    for (int64_t inner : {1, 7, 33}) {
      CAPTURE(outer);
      CAPTURE(inner);
      check_concat<float>(outer, inner, {5, 1, 0, 9}, DType::float32);
      check_concat<double>(outer, inner, {2, 3}, DType::float64);
      check_concat<uint16_t>(outer, inner, {4, 4, 4}, DType::bfloat16);
      check_concat<uint8_t>(outer, inner, {1, 6}, DType::uint8);
    }
  ConcatDesc bad;
  bad.sizes = {2, -1};
  CHECK_FALSE(cuda::supports_concat(bad));
  CHECK_THROWS_AS(cuda::concat(bad, nullptr, nullptr), Error);
}

TEST_CASE("emu: CUDA n-ary sum equals ref bit for bit, over 1 to 17 inputs (chained launches past 8)") {
  for (int64_t inputs : {1, 2, 7, 8, 9, 15, 16, 17}) {
    CAPTURE(inputs);
    check_sum<float>(1000, inputs, DType::float32);
    check_sum<double>(33, inputs, DType::float64);
  }
  check_sum<float>(0, 3, DType::float32);
  SumDesc h;
  h.dtype = DType::bfloat16;
  h.inputs = 2;
  CHECK_FALSE(cuda::supports_sum(h));
}

}  // namespace kiln
