// kiln's CUDA elementwise kernels (kernels/cuda/native/elementwise.cu) under the emulator,
// against the CPU ref kernels on small odd shapes: contiguous (float4 and scalar paths, aligned
// and not), broadcast and strided loops; float32, float64 and bfloat16.
// Tolerance: none. The emulator runs the same fn::unary/fn::binary functors in the same type as
// ref, so results must be bit-identical (NaN matching NaN); a GPU's own exp/log differ by ulps,
// which the gpu tests judge.  Run: ctest --test-dir build -R emu.elementwise
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/ref/elementwise.h"
#include "kernels/cuda/native/elementwise.h"

namespace {

using kiln::BFloat16;
using kiln::BinaryDesc;
using kiln::BinaryOp;
using kiln::DType;
using kiln::StridedLoop;
using kiln::UnaryDesc;
using kiln::UnaryOp;

const int64_t kSizes[] = {1, 7, 33, 1000, 4097};

// Deterministic values in [lo, hi).
std::vector<double> values(int64_t n, uint64_t seed, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& e : v) {
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    e = lo + (hi - lo) * double((x * 0x2545f4914f6cdd1dull) >> 11) / double(1ull << 53);
  }
  return v;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
bool same(T a, T b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}
bool same(BFloat16 a, BFloat16 b) { return a.bits == b.bits || (float(a) != float(a) && float(b) != float(b)); }

template <class T>
std::string first_difference(const std::vector<T>& got, const std::vector<T>& want) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i]))
      return "element " + std::to_string(i) + ": got " + std::to_string(double(got[i])) + ", want " +
             std::to_string(double(want[i]));
  return "";
}

StridedLoop contiguous_loop(int64_t n, int noperands) {
  StridedLoop L;
  L.ndim = 1;
  L.noperands = noperands;
  L.sizes[0] = n;
  for (int k = 0; k < noperands; ++k) L.strides[k][0] = 1;
  return L;
}

// The input range each op is defined on (log, sqrt and pow want positive inputs).
void range_of(UnaryOp op, double& lo, double& hi) {
  lo = -3, hi = 3;
  if (op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt || op == UnaryOp::pow_scalar) lo = 0.05;
}

// ref in S's compute type: float for bfloat16 (inputs widened, outputs rounded once).
template <class S>
void ref_unary(const UnaryDesc& d, const std::vector<S>& x, std::vector<S>& y) {
  if constexpr (std::is_same<S, BFloat16>::value) {
    std::vector<float> xf(x.begin(), x.end()), yf(y.size());
    UnaryDesc df = d;
    df.dtype = DType::float32;
    kiln::ref::unary<float>(df, xf.data(), yf.data());
    for (size_t i = 0; i < y.size(); ++i) y[i] = BFloat16(yf[i]);
  } else {
    kiln::ref::unary<S>(d, x.data(), y.data());
  }
}
template <class S>
void ref_binary(const BinaryDesc& d, const std::vector<S>& a, const std::vector<S>& b, std::vector<S>& y) {
  if constexpr (std::is_same<S, BFloat16>::value) {
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), yf(y.size());
    BinaryDesc df = d;
    df.dtype = DType::float32;
    kiln::ref::binary<float>(df, af.data(), bf.data(), yf.data());
    for (size_t i = 0; i < y.size(); ++i) y[i] = BFloat16(yf[i]);
  } else {
    kiln::ref::binary<S>(d, a.data(), b.data(), y.data());
  }
}

template <class S>
void check_unary_contiguous(DType dtype) {
  for (int op_i = 0; op_i <= int(UnaryOp::clamp_min); ++op_i) {
    const auto op = UnaryOp(op_i);
    double lo, hi;
    range_of(op, lo, hi);
    for (int64_t n : kSizes)
      for (int skew = 0; skew < 2; ++skew) {  // skew 1: pointers off 16-byte alignment
        UnaryDesc d;
        d.op = op;
        d.dtype = dtype;
        d.alpha = op == UnaryOp::pow_scalar ? 1.7 : 0.3;
        d.loop = contiguous_loop(n, 2);
        std::vector<S> x = as<S>(values(n + skew, uint64_t(n + op_i), lo, hi));
        std::vector<S> got(static_cast<size_t>(n + skew)), want(static_cast<size_t>(n));
        std::vector<S> xs(x.begin() + skew, x.end());
        ref_unary(d, xs, want);
        kiln::cuda::unary(d, x.data() + skew, got.data() + skew);
        got.erase(got.begin(), got.begin() + skew);
        INFO(kiln::unary_op_name(op), " n=", n, " skew=", skew, " ", kiln::dtype_name(dtype));
        const std::string diff = first_difference(got, want);
        CHECK_MESSAGE(diff.empty(), diff);
      }
  }
}

}  // namespace

TEST_CASE("emu elementwise: unary, contiguous, every op, float32/float64/bfloat16") {
  CHECK(kiln::cuda::supports_unary(UnaryDesc{}));
  check_unary_contiguous<float>(DType::float32);
  check_unary_contiguous<double>(DType::float64);
  check_unary_contiguous<BFloat16>(DType::bfloat16);
  UnaryDesc i32;
  i32.dtype = DType::int32;
  CHECK_FALSE(kiln::cuda::supports_unary(i32));
}

TEST_CASE("emu elementwise: unary, strided (a transposed [33, 7] read)") {
  const int64_t R = 33, C = 7;
  UnaryDesc d;
  d.op = UnaryOp::gelu;
  d.loop.ndim = 2;
  d.loop.noperands = 2;
  d.loop.sizes[0] = R;
  d.loop.sizes[1] = C;
  d.loop.strides[0][0] = C, d.loop.strides[0][1] = 1;  // dst [R, C] row-major
  d.loop.strides[1][0] = 1, d.loop.strides[1][1] = R;  // src is [C, R] transposed
  std::vector<float> x = as<float>(values(R * C, 3, -3, 3)), got(size_t(R * C)), want(size_t(R * C));
  kiln::ref::unary<float>(d, x.data(), want.data());
  kiln::cuda::unary(d, x.data(), got.data());
  CHECK(first_difference(got, want) == "");
}

template <class S>
void check_binary(DType dtype) {
  // [A, B] op [A, B], [A, B] op [1, B], [A, 1] op [1, B], and a scalar operand.
  struct Case {
    int64_t A, B;
    int64_t sa0, sa1, sb0, sb1;  // operand strides (0 = broadcast)
    bool contiguous;
  };
  for (int64_t n : kSizes) {
    const Case cases[] = {{1, n, 0, 1, 0, 1, true}, {3, n, n, 1, 0, 1, false}, {n, 5, 1, 0, 0, 1, false},
                          {2, n, n, 1, 0, 0, false}};
    for (const Case& c : cases)
      for (int op_i = 0; op_i <= int(BinaryOp::gelu_bwd); ++op_i) {
        const auto op = BinaryOp(op_i);
        BinaryDesc d;
        d.op = op;
        d.dtype = dtype;
        d.alpha = 0.2;
        if (c.contiguous) {
          d.loop = contiguous_loop(c.B, 3);
        } else {
          d.loop.ndim = 2;
          d.loop.noperands = 3;
          d.loop.sizes[0] = c.A, d.loop.sizes[1] = c.B;
          d.loop.strides[0][0] = c.B, d.loop.strides[0][1] = 1;
          d.loop.strides[1][0] = c.sa0, d.loop.strides[1][1] = c.sa1;
          d.loop.strides[2][0] = c.sb0, d.loop.strides[2][1] = c.sb1;
        }
        const int64_t na = (c.A - 1) * c.sa0 + (c.B - 1) * c.sa1 + 1, nb = (c.A - 1) * c.sb0 + (c.B - 1) * c.sb1 + 1;
        const double lo = op == BinaryOp::pow ? 0.1 : -2;
        std::vector<S> a = as<S>(values(na, uint64_t(op_i + 10 * n), lo, 2));
        std::vector<S> b = as<S>(values(nb, uint64_t(op_i + 10 * n + 5), -2, 2));
        if (op >= BinaryOp::eq && op <= BinaryOp::le)  // make ties happen
          for (size_t i = 0; i < b.size() && i < a.size(); i += 3) b[i] = a[i];
        std::vector<S> got(size_t(c.A * c.B)), want(size_t(c.A * c.B));
        ref_binary(d, a, b, want);
        kiln::cuda::binary(d, a.data(), b.data(), got.data());
        INFO(kiln::binary_op_name(op), " A=", c.A, " B=", c.B, " ", kiln::dtype_name(dtype));
        const std::string diff = first_difference(got, want);
        CHECK_MESSAGE(diff.empty(), diff);
      }
  }
}

TEST_CASE("emu elementwise: binary with broadcasting, every op, float32/float64/bfloat16") {
  check_binary<float>(DType::float32);
  check_binary<double>(DType::float64);
  check_binary<BFloat16>(DType::bfloat16);
  CHECK(kiln::cuda::supports_binary(BinaryDesc{}));
}
