// kiln's CUDA reduction (kernels/cuda/native/reduce.cu) under the emulator against the CPU ref
// kernel in double, over [outer, reduce, inner] shapes that take the one-pass and the two-pass
// paths of both kernels (rows: inner == 1; columns: inner > 1).
// Tolerance: the GPU sums in its own type in another order than ref, so |got - ref| must stay
// within (log2(reduce) + 2) * eps(T) * sum|x| per output; and a second run gives the same bits
// (determinism: no atomics). Run: ctest --test-dir build -R emu.reduce
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/ref/reduce.h"
#include "kernels/cuda/native/reduce.h"

namespace {

using kiln::DType;
using kiln::ReduceDesc;
using kiln::ReduceOp;

template <class T>
void check_shape(int64_t outer, int64_t len, int64_t inner, ReduceOp op) {
  ReduceDesc d;
  d.op = op;
  d.dtype = std::is_same<T, float>::value ? DType::float32 : DType::float64;
  d.outer = outer, d.reduce = len, d.inner = inner;
  const size_t n = size_t(outer * len * inner), m = size_t(outer * inner);
  std::vector<T> x(n);
  std::vector<double> xd(n), ad(n);
  uint64_t s = uint64_t(outer * 131 + len * 7 + inner);
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = T(double(s >> 40) / double(1ull << 24) * 2 - 1 + 0.25);  // mostly positive: sums grow
    xd[i] = double(x[i]);
    ad[i] = std::fabs(xd[i]);
  }
  std::vector<double> want(m), mag(m);
  ReduceDesc dd = d;
  dd.dtype = DType::float64;
  kiln::ref::reduce<double>(dd, xd.data(), want.data(), nullptr);
  kiln::ref::reduce<double>(dd, ad.data(), mag.data(), nullptr);
  std::vector<T> got(m), again(m);
  kiln::cuda::reduce(d, x.data(), got.data(), nullptr);
  kiln::cuda::reduce(d, x.data(), again.data(), nullptr);
  CHECK(std::memcmp(got.data(), again.data(), m * sizeof(T)) == 0);
  const double eps = std::numeric_limits<T>::epsilon() * (std::log2(double(len) + 1) + 2);
  for (size_t k = 0; k < m; ++k) {
    INFO("outer=", outer, " reduce=", len, " inner=", inner, " output ", k);
    if (len == 0 && op == ReduceOp::mean) {
      CHECK(std::isnan(double(got[k])));
      continue;
    }
    CHECK(std::fabs(double(got[k]) - want[k]) <= eps * mag[k] + 1e-30);
  }
}

}  // namespace

TEST_CASE("emu reduce: sum and mean over rows (inner == 1), one and two passes") {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    for (int64_t len : {1, 7, 33, 1000, 4097, 100003}) check_shape<float>(1, len, 1, op);
    check_shape<float>(5, 33, 1, op);
    check_shape<float>(3, 9000, 1, op);   // two passes, several rows
    check_shape<double>(2, 20000, 1, op);
    check_shape<float>(2, 0, 1, op);      // empty axis: 0, and NaN for mean as ref
  }
}

TEST_CASE("emu reduce: sum and mean over columns (inner > 1), one and two passes") {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    check_shape<float>(1, 7, 33, op);
    check_shape<float>(3, 5, 7, op);
    check_shape<float>(2, 1000, 3, op);  // two passes over a short inner axis
    check_shape<double>(1, 4097, 33, op);
    check_shape<float>(4, 1, 1000, op);
  }
}

TEST_CASE("emu reduce: supports") {
  ReduceDesc d;
  CHECK(kiln::cuda::supports_reduce(d));
  d.op = ReduceOp::max;
  CHECK_FALSE(kiln::cuda::supports_reduce(d));
  d.op = ReduceOp::sum;
  d.dtype = DType::bfloat16;
  CHECK_FALSE(kiln::cuda::supports_reduce(d));
}
