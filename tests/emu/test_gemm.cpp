// kiln's own CUDA GEMM (kernels/cuda/native/gemm.cu) under the emulator, against the ref GEMM in
// double: every m, n, k in {1, 7, 33, 65, 130} (both the 16x16 and the 128x128 kernel), all
// four transposes, a batch of 3, padded and 16-byte-aligned leading dimensions (the float4
// path), alpha/beta, beta = 0 over NaN.
//   ctest --test-dir build -R emu.test_gemm
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/ref/gemm.h"
#include "kernels/cuda/native/gemm.h"

namespace kiln {
namespace {

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = double(int64_t(s >> 40) % 2001 - 1000) / 1000.0;  // [-1, 1], exact in float
  }
  return v;
}

int64_t round_up4(int64_t x) { return (x + 3) / 4 * 4; }

// Runs one GEMM on the emulated device in T and in double on ref; returns the worst error
// relative to the tolerance (<= 1 passes).
template <class T>
double run_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch, bool align, double alpha,
                double beta) {
  GemmDesc d;
  d.dtype = std::is_same<T, float>::value ? DType::float32 : DType::float64;
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = m; d.n = n; d.k = k;
  // Padded leading dimensions: a multiple of 4 (vector loads) or odd (scalar loads).
  auto ld = [&](int64_t min) { return align ? round_up4(min) : min + 1; };
  d.lda = ld(ta ? m : k);
  d.ldb = ld(tb ? k : n);
  d.ldc = ld(n);
  const int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
  d.stride_a = align ? round_up4(rows_a * d.lda + 1) : rows_a * d.lda + 3;
  d.stride_b = align ? round_up4(rows_b * d.ldb + 1) : rows_b * d.ldb + 3;
  d.stride_c = m * d.ldc + 1;
  d.batch = batch;
  d.alpha = alpha;
  d.beta = beta;
  const auto a = random_values(size_t(d.stride_a * batch), uint64_t(m * 131 + k));
  const auto b = random_values(size_t(d.stride_b * batch), uint64_t(n * 137 + k + 1));
  auto c = random_values(size_t(d.stride_c * batch), uint64_t(m * n + 5));
  if (beta == 0)  // C must not be read
    for (auto& x : c) x = std::numeric_limits<double>::quiet_NaN();
  std::vector<T> at(a.begin(), a.end()), bt(b.begin(), b.end()), ct(c.begin(), c.end());
  cuda::gemm(d, at.data(), bt.data(), ct.data());
  std::vector<double> cr = c;
  GemmDesc dr = d;
  dr.dtype = DType::float64;
  ref::gemm<double>(dr, a.data(), b.data(), cr.data());
  // Float error grows with k (each product rounded, k additions): eps * (k + 2) with |a|,|b| <= 1.
  const double eps = std::is_same<T, float>::value ? 6e-8 : 1.2e-16;
  const double tol = 4 * eps * double(k + 2) * (std::abs(alpha) + std::abs(beta)) + 2 * eps;
  double worst = 0;
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const size_t at_ = size_t(z * d.stride_c + i * d.ldc + j);
        const double err = std::abs(double(ct[at_]) - cr[at_]) / tol;
        if (!(err <= worst)) worst = std::isnan(err) ? 1e30 : err;
      }
  // Padding between rows and batches is never written.
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = n; j < d.ldc; ++j) {
        const size_t at_ = size_t(z * d.stride_c + i * d.ldc + j);
        if (!(std::isnan(c[at_]) && std::isnan(double(ct[at_]))) && double(ct[at_]) != double(T(c[at_]))) worst = 1e30;
      }
  return worst;
}

const int64_t kSizes[] = {1, 7, 33, 65, 130};

}  // namespace

TEST_CASE("emu gemm float32: every m, n, k in {1, 7, 33, 65, 130} x transposes, batch 3") {
  int count = 0;
  for (int64_t m : kSizes)
    for (int64_t n : kSizes)
      for (int64_t k : kSizes)
        for (int t = 0; t < 4; ++t) {
          const bool ta = t & 1, tb = t & 2;
          const bool align = (count++ % 2) == 0;  // alternate padded-to-4 and odd leading dims
          const double w = run_case<float>(ta, tb, m, n, k, 3, align, 1.0, 0.0);
          INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " align=" << align);
          CHECK(w <= 1.0);
        }
}

TEST_CASE("emu gemm float32: alpha, beta, aligned vector loads") {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    INFO("ta=" << ta << " tb=" << tb);
    CHECK(run_case<float>(ta, tb, 130, 65, 33, 1, true, 0.5, 0.75) <= 1.0);
    CHECK(run_case<float>(ta, tb, 7, 33, 65, 2, false, -1.5, 1.0) <= 1.0);
  }
}

TEST_CASE("emu gemm float64") {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    INFO("ta=" << ta << " tb=" << tb);
    CHECK(run_case<double>(ta, tb, 65, 130, 33, 2, false, 1.0, 0.0) <= 1.0);
    CHECK(run_case<double>(ta, tb, 7, 1, 65, 3, true, 0.5, -0.25) <= 1.0);
  }
}

TEST_CASE("emu gemm: empty shapes and errors") {
  GemmDesc d;
  d.m = 0; d.n = 5; d.k = 3; d.lda = 3; d.ldb = 5; d.ldc = 5;
  cuda::gemm(d, nullptr, nullptr, nullptr);  // nothing to do, nothing read
  // k = 0: C = beta * C.
  std::vector<float> c(6, 2.f);
  d.m = 2; d.n = 3; d.k = 0; d.lda = 1; d.ldb = 3; d.ldc = 3; d.beta = 0.5;
  float dummy = 0;
  cuda::gemm(d, &dummy, &dummy, c.data());
  for (float x : c) CHECK(x == 1.f);
  d.lda = 0;
  d.k = 4;
  CHECK_THROWS_AS(cuda::gemm(d, &dummy, &dummy, c.data()), kiln::Error);
  d.dtype = DType::int32;
  CHECK_FALSE(cuda::supports_gemm(d));
}

}  // namespace kiln
