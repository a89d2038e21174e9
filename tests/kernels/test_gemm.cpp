// GEMM kernels and the matmul/linear op wrappers: every native float32 path this CPU has
// (avx512, avx2, vsx, neon, sve, eigen; forced one at a time) against the reference kernel in double, over tiny,
// odd and block-crossing shapes, all transposes, padded leading dims, alpha/beta, beta = 0 over
// NaN, batches; hand-computed values; errors that name the op and shapes.
//   ctest --test-dir build -R kernels.test_gemm
#include "tests/support/testing.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "engine/ops/linalg.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/ref/gemm.h"

using namespace kiln;
using native::GemmPath;

namespace {

std::vector<GemmPath> paths_here() {
  std::vector<GemmPath> out;
  for (GemmPath p : {GemmPath::avx512, GemmPath::avx2, GemmPath::vsx, GemmPath::neon, GemmPath::sve, GemmPath::eigen,
                     GemmPath::ref})
    if (native::gemm_path_available(p)) out.push_back(p);
  return out;
}

// Restores the GEMM path and thread count a test changed.
struct PathGuard {
  GemmPath prev = native::gemm_path();
  int threads = num_threads();
  ~PathGuard() {
    native::set_gemm_path(prev);
    set_num_threads(threads);
  }
};

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // leading dim = natural + pad
  double alpha = 1, beta = 0;
  int64_t batch = 1;
  bool shared_b = false;  // stride_b = 0
};

std::string case_str(const Case& c) {
  std::ostringstream os;
  os << c.m << "x" << c.n << "x" << c.k << " " << (c.ta ? 'T' : 'N') << (c.tb ? 'T' : 'N') << " pad " << c.pad_a << ","
     << c.pad_b << "," << c.pad_c << " alpha " << c.alpha << " beta " << c.beta << " batch " << c.batch
     << (c.shared_b ? " shared_b" : "");
  return os.str();
}

// Runs `c` on the current native path in float32 and checks it against ref::gemm in double:
// |got - want| <= 1e-5 * (|alpha| sum_p |a||b| + |beta c|) + 1e-6 on every element of C, and
// the ld padding of C untouched. Returns the float32 result (for determinism checks).
std::vector<float> check_case(const Case& c) {
  CAPTURE(case_str(c));
  GemmDesc d;
  d.trans_a = c.ta;
  d.trans_b = c.tb;
  d.m = c.m, d.n = c.n, d.k = c.k;
  d.lda = (c.ta ? c.m : c.k) + c.pad_a;
  d.ldb = (c.tb ? c.k : c.n) + c.pad_b;
  d.ldc = c.n + c.pad_c;
  d.lda = std::max<int64_t>(d.lda, 1), d.ldb = std::max<int64_t>(d.ldb, 1), d.ldc = std::max<int64_t>(d.ldc, 1);
  d.alpha = c.alpha, d.beta = c.beta;
  d.batch = c.batch;
  const int64_t size_a = (c.ta ? c.k : c.m) * d.lda, size_b = (c.tb ? c.n : c.k) * d.ldb, size_c = c.m * d.ldc;
  d.stride_a = size_a + 5;
  d.stride_b = c.shared_b ? 0 : size_b + 3;
  d.stride_c = size_c + 7;
  const int64_t na = d.stride_a * c.batch, nb = c.shared_b ? size_b : d.stride_b * c.batch, nc = d.stride_c * c.batch;
  std::mt19937 rng(uint32_t(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(size_t(std::max<int64_t>(na, 1))), b(size_t(std::max<int64_t>(nb, 1))),
      cf(size_t(std::max<int64_t>(nc, 1)));
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  const float sentinel = 12345.f;
  for (auto& v : cf) v = c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  // Mark the padding of C (columns n .. ldc and the gaps between batch entries).
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < d.stride_c; ++i) {
      const int64_t row = i / d.ldc, col = i % d.ldc;
      if (row >= c.m || col >= c.n) cf[size_t(bi * d.stride_c + i)] = sentinel;
    }
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(cf.begin(), cf.end());
  for (auto& v : cd) if (std::isnan(v)) v = 0;  // beta == 0: never read
  std::vector<double> aabs(ad), babs(bd), scale(cd);
  for (auto& v : aabs) v = std::abs(v);
  for (auto& v : babs) v = std::abs(v);
  for (auto& v : scale) v = std::abs(v);

  ref::gemm<double>(d, ad.data(), bd.data(), cd.data());
  GemmDesc ds = d;
  ds.alpha = std::abs(d.alpha), ds.beta = std::abs(d.beta);
  ref::gemm<double>(ds, aabs.data(), babs.data(), scale.data());
  d.dtype = DType::float32;
  native::gemm(d, a.data(), b.data(), cf.data());

  int64_t bad = 0;
  std::string first;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < d.ldc; ++j) {
        const size_t at = size_t(bi * d.stride_c + i * d.ldc + j);
        const bool inside = j < c.n;
        const double want = inside ? cd[at] : sentinel;
        const double tol = inside ? 1e-5 * scale[at] + 1e-6 : 0.0;
        if (!(std::abs(double(cf[at]) - want) <= tol)) {
          if (bad++ == 0)
            first = "batch " + std::to_string(bi) + " C[" + std::to_string(i) + ", " + std::to_string(j) + "] = " +
                    std::to_string(cf[at]) + ", want " + std::to_string(want);
        }
      }
  CHECK_MESSAGE(bad == 0, bad, " bad elements; first: ", first);
  return cf;
}

std::vector<Case> transposes(Case c) {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      c.ta = ta, c.tb = tb;
      out.push_back(c);
    }
  return out;
}

}  // namespace

TEST_CASE("gemm paths available here") {
  MESSAGE("CPU features: " << native::cpu_features_str() << "; default GEMM path: "
                           << std::string(native::gemm_path_name(native::gemm_path())));
  const native::CpuIsa& isa = native::cpu_isa();
  const native::CpuArch arch = native::build_arch();
  CHECK(native::gemm_path_available(GemmPath::avx512) == native::has_avx512f());
  CHECK(native::gemm_path_available(GemmPath::avx2) == native::has_avx2());
  CHECK(native::gemm_path_available(GemmPath::vsx) == (arch == native::CpuArch::ppc64le && isa.vsx));
  CHECK(native::gemm_path_available(GemmPath::neon) == (arch == native::CpuArch::aarch64 && isa.asimd));
  CHECK(native::gemm_path_available(GemmPath::sve) ==
        (arch == native::CpuArch::aarch64 && isa.sve && (isa.sve_bits == 256 || isa.sve_bits == 512)));
  CHECK(native::gemm_path_available(GemmPath::ref));
#ifdef KILN_HAVE_EIGEN
  CHECK(native::gemm_path_available(GemmPath::eigen));
#endif
  if (native::has_avx512_core()) CHECK(native::has_avx512f());
}

TEST_CASE("every native path matches the reference on odd and block-crossing shapes") {
  PathGuard guard;
  std::vector<Case> cases;
  // Tiny, prime, exactly one register tile, one past it, vectors, and shapes crossing the cache
  // blocks (avx512: kc 256, nc 1024; kc 1024 when C has <= 128 columns and A is read in place;
  // the k split of 513 is 171 + 171 + 171).
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},    {2, 3, 4},     {17, 31, 13},  {12, 32, 16},
                                                            {13, 33, 17}, {6, 16, 8},    {1, 100, 7},   {100, 1, 7},
                                                            {5, 7, 1},    {64, 64, 64},  {7, 5, 600},   {193, 65, 40},
                                                            {20, 2100, 9}, {300, 257, 513},
                                                            {30, 40, 1100}, {50, 1500, 70}})
    for (const Case& c : transposes(Case{m, n, k, false, false})) cases.push_back(c);
  // Leading dims larger than the matrix, alpha/beta, and beta = 0 over NaN.
  for (const Case& c : transposes(Case{17, 31, 13, false, false, 3, 5, 2, 0.5, 0.0})) cases.push_back(c);
  for (const Case& c : transposes(Case{37, 45, 70, false, false, 1, 2, 9, 1.5, -0.75})) cases.push_back(c);
  for (const Case& c : transposes(Case{33, 40, 29, false, false, 0, 0, 0, -1.0, 1.0})) cases.push_back(c);
  // One row or one column of C (matrix-vector loops), with padded leading dims and beta.
  for (const Case& c : transposes(Case{1, 300, 700, false, false, 2, 3, 1, 0.5, 0.0})) cases.push_back(c);
  for (const Case& c : transposes(Case{500, 1, 300, false, false, 1, 2, 3, 1.0, -2.0})) cases.push_back(c);
  for (const Case& c : transposes(Case{1, 1, 2000, false, false, 0, 0, 0, 1.0, 1.0})) cases.push_back(c);
  // Batches: separate operands, and one B shared by every entry (stride 0).
  for (const Case& c : transposes(Case{9, 35, 21, false, false, 2, 0, 1, 1.0, 0.5, 3})) cases.push_back(c);
  cases.push_back(Case{40, 50, 60, false, true, 0, 0, 0, 1.0, 0.0, 4, true});
  cases.push_back(Case{3, 4, 5, true, false, 0, 0, 0, 1.0, 0.0, 7});
  // Random shapes, layouts and scalars: every edge-tile width and height with and without beta.
  std::mt19937 rng(42);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 60; ++i) {
    Case c{pick(1, 80), pick(1, 80), pick(1, 80), pick(0, 1) == 1, pick(0, 1) == 1, pick(0, 3), pick(0, 3), pick(0, 3)};
    const double alphas[] = {1.0, -0.5, 2.0}, betas[] = {0.0, 1.0, 0.25};
    c.alpha = alphas[pick(0, 2)];
    c.beta = betas[pick(0, 2)];
    c.batch = pick(1, 2);
    cases.push_back(c);
  }
  // Wider C (n > 128): A packed instead of read in place.
  for (int i = 0; i < 16; ++i) {
    Case c{pick(1, 40), pick(129, 260), pick(1, 300), pick(0, 1) == 1, pick(0, 1) == 1, pick(0, 2), pick(0, 2), pick(0, 2)};
    c.beta = i % 2 ? 0.5 : 0.0;
    cases.push_back(c);
  }

  for (GemmPath p : paths_here()) {
    if (p == GemmPath::ref) continue;  // the float32 ref loop is the oracle's own code
    native::set_gemm_path(p);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      CAPTURE(native::gemm_path_name(p));
      CAPTURE(threads);
      for (const Case& c : cases) check_case(c);
    }
  }
}

TEST_CASE("register-tiled paths give the same bits for any thread count") {
  PathGuard guard;
  for (GemmPath p : {GemmPath::avx512, GemmPath::avx2, GemmPath::vsx, GemmPath::neon, GemmPath::sve}) {
    if (!native::gemm_path_available(p)) continue;
    CAPTURE(native::gemm_path_name(p));
    native::set_gemm_path(p);
    for (const Case& c : {Case{300, 257, 513, false, true}, Case{70, 2100, 33, true, false}}) {
      set_num_threads(1);
      std::vector<float> one = check_case(c);
      set_num_threads(2);
      std::vector<float> two = check_case(c);
      CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

#ifdef __linux__
namespace {
// n floats ending right before a PROT_NONE page: reading one element past the end faults.
struct GuardedFloats {
  char* base = nullptr;
  size_t bytes = 0;
  float* data = nullptr;
  explicit GuardedFloats(size_t n) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t body = (n * sizeof(float) + page - 1) / page * page;
    bytes = body + page;
    base = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    REQUIRE(mprotect(base + body, page, PROT_NONE) == 0);
    data = reinterpret_cast<float*>(base + body) - n;
    for (size_t i = 0; i < n; ++i) data[i] = float(i % 7) - 3.f;
  }
  ~GuardedFloats() { munmap(base, bytes); }
};
}  // namespace

TEST_CASE("no path reads or writes past the end of an operand") {
  PathGuard guard;
  for (GemmPath p : paths_here()) {
    native::set_gemm_path(p);
    CAPTURE(native::gemm_path_name(p));
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {13, 33, 17}, {7, 130, 19}, {25, 200, 40}, {3, 5, 300},
                                                                   {1, 40, 300}, {40, 1, 300}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          GuardedFloats a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n));
          native::sgemm(ta, tb, m, n, k, 1.f, a.data, ta ? m : k, b.data, tb ? k : n, 0.5f, c.data, n);
          CHECK(std::isfinite(c.data[m * n - 1]));
        }
  }
}
#endif

TEST_CASE("k = 0 and alpha = 0 only scale C; empty shapes do nothing") {
  PathGuard guard;
  for (GemmPath p : paths_here()) {
    native::set_gemm_path(p);
    CAPTURE(native::gemm_path_name(p));
    std::vector<float> c = {1, 2, 3, 4, 5, 6};
    float a = 7, b = 8;
    native::sgemm(false, false, 2, 3, 0, 1.f, &a, 1, &b, 3, 2.f, c.data(), 3);
    CHECK(c == std::vector<float>{2, 4, 6, 8, 10, 12});
    native::sgemm(false, false, 2, 3, 0, 1.f, &a, 1, &b, 3, 0.f, c.data(), 3);
    CHECK(c == std::vector<float>{0, 0, 0, 0, 0, 0});
    c = {1, 2, 3, 4, 5, 6};
    native::sgemm(false, false, 0, 3, 4, 1.f, &a, 4, &b, 3, 0.f, c.data(), 3);
    CHECK(c == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
}

TEST_CASE("reference gemm on hand-computed values, double and batched") {
  // [[1, 2, 3], [4, 5, 6]] @ [[1, 0], [0, 1], [1, 1]] = [[4, 5], [10, 11]]
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1}, c = {100, 100, 100, 100};
  GemmDesc d;
  d.dtype = DType::float64;
  d.m = 2, d.n = 2, d.k = 3, d.lda = 3, d.ldb = 2, d.ldc = 2;
  d.alpha = 2, d.beta = 0.5;
  ref::gemm<double>(d, a.data(), b.data(), c.data());
  CHECK(c == std::vector<double>{58, 60, 70, 72});
  // The same A stored transposed (K x M, trans_a).
  std::vector<double> at = {1, 4, 2, 5, 3, 6};
  std::vector<double> c2(4);
  GemmDesc dt = d;
  dt.trans_a = true, dt.lda = 2, dt.alpha = 1, dt.beta = 0;
  ref::gemm<double>(dt, at.data(), b.data(), c2.data());
  CHECK(c2 == std::vector<double>{4, 5, 10, 11});
  // The native float64 path agrees.
  std::vector<double> c3(4);
  native::gemm(dt, at.data(), b.data(), c3.data());
  CHECK(c3 == c2);
}

TEST_CASE("matmul and linear: values") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<double>{5, 6, 7, 8}, {2, 2});
  CHECK(ops::matmul(a, b).to_vector() == std::vector<double>{19, 22, 43, 50});
  CHECK(ops::matmul(a.t(), b).to_vector() == std::vector<double>{26, 30, 38, 44});
  CHECK(ops::matmul(a, b.t()).to_vector() == std::vector<double>{17, 23, 39, 53});
  Tensor a3 = from_vector(std::vector<double>{1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2});
  Tensor r3 = ops::matmul(a3, b);
  CHECK(r3.sizes() == Shape{2, 2, 2});
  CHECK(r3.to_vector() == std::vector<double>{19, 22, 43, 50, 7, 8, 5, 6});
  Tensor b3 = from_vector(std::vector<double>{1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});
  CHECK(ops::matmul(a3, b3).to_vector() == std::vector<double>{1, 2, 3, 4, 0, 2, 2, 0});
  // linear: weight [out=3, in=2], y = x W^T + b
  Tensor w = from_vector(std::vector<double>{1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor bias = from_vector(std::vector<double>{10, 20, 30}, {3});
  CHECK(ops::linear(a, w, bias).to_vector() == std::vector<double>{11, 22, 33, 13, 24, 37});
  CHECK(ops::linear(a, w).to_vector() == std::vector<double>{1, 2, 3, 3, 4, 7});
  Tensor x1 = from_vector(std::vector<double>{1, 2}, {2});
  CHECK(ops::linear(x1, w, bias).sizes() == Shape{3});
  CHECK(ops::linear(a3, w, bias).sizes() == Shape{2, 2, 3});
  // float16 and float32 agree with double on small integers.
  CHECK(ops::matmul(a.to(DType::bfloat16), b.to(DType::bfloat16)).to_vector() == std::vector<double>{19, 22, 43, 50});
  CHECK(ops::matmul(a.to(DType::float32), b.to(DType::float32)).dtype() == DType::float32);
  // Empty inner dim: zeros (plus bias).
  CHECK(ops::matmul(zeros({2, 0}), zeros({0, 3})).to_vector() == std::vector<double>(6, 0.0));
  CHECK(ops::linear(zeros({2, 0}), zeros({3, 0}), full({3}, 1.0)).to_vector() == std::vector<double>(6, 1.0));
}

TEST_CASE("matmul and linear errors name the op and shapes") {
  CHECK_THROWS_KILN(ops::matmul(zeros({2, 3}), zeros({4, 5})), "matmul: [2, 3] @ [4, 5]: inner dims 3 and 4 differ");
  CHECK_THROWS_KILN(ops::matmul(zeros({2, 3, 4}), zeros({5, 4, 2})), "matmul: [2, 3, 4] @ [5, 4, 2]: batch sizes 2 and 5 differ");
  CHECK_THROWS_KILN(ops::matmul(zeros({3}), zeros({3, 2})), "matmul: [3] @ [3, 2]: expects");
  CHECK_THROWS_KILN(ops::matmul(zeros({2, 3}), zeros({2, 3, 4})), "matmul: [2, 3] @ [2, 3, 4]: expects");
  CHECK_THROWS_KILN(ops::matmul(zeros({2, 3}), zeros({3, 2}, DType::float64)), "matmul: dtype mismatch, float32 [2, 3] vs float64 [3, 2]");
  CHECK_THROWS_KILN(ops::matmul(zeros({2, 3}, DType::int64), zeros({3, 2}, DType::int64)), "matmul: needs floating-point");
  CHECK_THROWS_KILN(ops::matmul(Tensor(), zeros({3, 2})), "matmul: undefined a");
  CHECK_THROWS_KILN(ops::linear(zeros({2, 3}), zeros({4, 5})), "linear: input [2, 3] has 3 features but weight [4, 5] expects 5");
  CHECK_THROWS_KILN(ops::linear(zeros({2, 3}), zeros({4})), "linear: weight must be 2-d [out, in], got [4]");
  CHECK_THROWS_KILN(ops::linear(zeros({2, 3}), zeros({4, 3}), zeros({5})), "linear: bias [5] does not match weight [4, 3] (expects [4])");
  CHECK_THROWS_KILN(ops::linear(zeros({2, 3}), zeros({4, 3}), zeros({4}, DType::float64)), "linear: bias dtype float64");
  // The kernel itself checks leading dims (other kernels call sgemm directly).
  std::vector<float> buf(64);
  CHECK_THROWS_KILN(native::sgemm(false, false, 4, 4, 4, 1.f, buf.data(), 3, buf.data(), 4, 0.f, buf.data(), 4),
                    "gemm: lda 3 < 4 in gemm float32 NN m4n4k4");
  CHECK_THROWS_KILN(native::sgemm(false, true, 4, 4, 4, 1.f, buf.data(), 4, buf.data(), 4, 0.f, buf.data(), 2),
                    "gemm: ldc 2 < 4");
  CHECK_THROWS_KILN(native::set_gemm_path(GemmPath(200)), "set_gemm_path");
}
