// The native bfloat16 GEMM (kernels/cpu/native/gemm_bf16.h) and the native bfloat16 linear on it:
// every path this CPU has (avx512_bf16, widen; forced one at a time, one and two threads) against
// the reference kernel in double on the same bfloat16 inputs. Odd k (the last pair padded), edge
// tiles, all transposes, padded leading dims, alpha/beta, batches, blocks of k and n crossed;
// small integers, whose sums float32 holds exactly, must come out exact.
//   ctest --test-dir build -R kernels.test_gemm_bf16
#include "tests/support/testing.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "engine/backend_preference.h"
#include "engine/dispatch.h"
#include "engine/ops/linalg.h"
#include "kernels/common/half.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/native/gemm_bf16.h"
#include "kernels/cpu/native/linear.h"
#include "kernels/cpu/ref/gemm.h"
#include "kernels/cpu/ref/linear.h"

using namespace kiln;
using native::Bf16GemmPath;

namespace {

std::vector<Bf16GemmPath> paths_here() {
  std::vector<Bf16GemmPath> out;
  for (Bf16GemmPath p : {Bf16GemmPath::avx512_bf16, Bf16GemmPath::widen})
    if (native::bf16_gemm_path_available(p)) out.push_back(p);
  return out;
}

struct PathGuard {
  Bf16GemmPath prev = native::bf16_gemm_path();
  int threads = num_threads();
  ~PathGuard() {
    native::set_bf16_gemm_path(prev);
    set_num_threads(threads);
  }
};

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad = 0;  // added to every leading dimension
  double alpha = 1, beta = 0;
  int64_t batch = 1;
};

std::string case_str(const Case& c) {
  std::ostringstream os;
  os << c.m << "x" << c.n << "x" << c.k << " " << (c.ta ? 'T' : 'N') << (c.tb ? 'T' : 'N') << " pad " << c.pad
     << " alpha " << c.alpha << " beta " << c.beta << " batch " << c.batch;
  return os.str();
}

GemmDesc desc_of(const Case& c) {
  GemmDesc d;
  d.dtype = DType::bfloat16;
  d.trans_a = c.ta, d.trans_b = c.tb;
  d.m = c.m, d.n = c.n, d.k = c.k;
  d.lda = (c.ta ? c.m : c.k) + c.pad;
  d.ldb = (c.tb ? c.k : c.n) + c.pad;
  d.ldc = c.n + c.pad;
  d.alpha = c.alpha, d.beta = c.beta;
  d.batch = c.batch;
  d.stride_a = (c.ta ? c.k : c.m) * d.lda;
  d.stride_b = (c.tb ? c.n : c.k) * d.ldb;
  d.stride_c = c.m * d.ldc;
  return d;
}

// Values uniform in [-1, 1) rounded to bfloat16, or small integers (exact in float32 sums).
std::vector<BFloat16> make(size_t n, std::mt19937& rng, bool integers) {
  std::vector<BFloat16> v(n);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> i(-3, 3);
  for (auto& x : v) x = BFloat16(integers ? float(i(rng)) : u(rng));
  return v;
}

std::vector<double> to_double(const std::vector<BFloat16>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = double(float(v[i]));
  return out;
}

// sum_p |op(A)(i, p) op(B)(p, j)| for every (batch, i, j), in C's layout: the scale of the
// float32 rounding error of the sum.
std::vector<double> abs_sums(const GemmDesc& d, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> aa(a.size()), bb(b.size());
  for (size_t i = 0; i < a.size(); ++i) aa[i] = std::fabs(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bb[i] = std::fabs(b[i]);
  GemmDesc e = d;
  e.alpha = 1, e.beta = 0;
  std::vector<double> s(size_t(d.batch * d.stride_c), 0.0);
  ref::gemm<double>(e, aa.data(), bb.data(), s.data());
  return s;
}

// Runs one case through native::gemm (bfloat16 C) and bf16gemm (float32 C) and checks both
// against ref in double. Returns the float32 C of bf16gemm (batch entry 0) for bit comparisons.
std::vector<float> check_case(const Case& c, bool integers = false) {
  CAPTURE(case_str(c));
  CAPTURE(integers);
  const GemmDesc d = desc_of(c);
  std::mt19937 rng(uint32_t(c.m * 7919 + c.n * 131 + c.k));
  const auto a = make(size_t(d.batch * d.stride_a), rng, integers);
  const auto b = make(size_t(d.batch * d.stride_b), rng, integers);
  const auto c0 = make(size_t(d.batch * d.stride_c), rng, integers);
  const auto da = to_double(a), db = to_double(b);
  std::vector<double> want = to_double(c0);
  ref::gemm<double>(d, da.data(), db.data(), want.data());
  const std::vector<double> sabs = abs_sums(d, da, db);
  const double u = std::ldexp(1.0, -24);

  // GemmDesc entry: bfloat16 C, one rounding.
  std::vector<BFloat16> got = c0;
  native::gemm(d, a.data(), b.data(), got.data());
  int bad = 0;
  for (int64_t p = 0; p < d.batch; ++p)
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        const size_t at = size_t(p * d.stride_c + i * d.ldc + j);
        // float32 sums: at most (k + 4) u of the absolute sum; then half a bfloat16 ulp (2^-8
        // relative at worst) of the result.
        const double facc = (double(d.k) + 4) * u * (std::fabs(d.alpha) * sabs[at] + std::fabs(d.beta * float(c0[at])));
        const double tol = facc + std::ldexp(1.0, -8) * (std::fabs(want[at]) + facc);
        if (!test::near(double(float(got[at])), want[at], tol) && ++bad <= 3)
          FAIL_CHECK("bf16 C at [" << p << "," << i << "," << j << "]: got " << float(got[at]) << " want " << want[at]
                                   << " tol " << tol);
      }
  CHECK(bad == 0);
  // Gaps of ldc and between batch entries are never written.
  for (int64_t p = 0; p < d.batch; ++p)
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = d.n; j < d.ldc; ++j) {
        const size_t at = size_t(p * d.stride_c + i * d.ldc + j);
        REQUIRE(got[at].bits == c0[at].bits);
      }

  // Float32 C entry (batch entry 0).
  std::vector<float> f(size_t(d.stride_c));
  for (size_t i = 0; i < f.size(); ++i) f[i] = float(c0[i]);
  native::bf16gemm(d.trans_a, d.trans_b, d.m, d.n, d.k, float(d.alpha), a.data(), d.lda, b.data(), d.ldb,
                   float(d.beta), f.data(), d.ldc);
  bad = 0;
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      const size_t at = size_t(i * d.ldc + j);
      const double tol = integers ? 0.0
                                  : (double(d.k) + 4) * u *
                                        (std::fabs(d.alpha) * sabs[at] + std::fabs(d.beta * float(c0[at])));
      if (!test::near(double(f[at]), want[at], tol) && ++bad <= 3)
        FAIL_CHECK("float C at [" << i << "," << j << "]: got " << f[at] << " want " << want[at] << " tol " << tol);
    }
  CHECK(bad == 0);
  return f;
}

std::vector<Case> transposes(Case c) {
  std::vector<Case> v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      c.ta = ta, c.tb = tb;
      v.push_back(c);
    }
  return v;
}

}  // namespace

TEST_CASE("bf16 gemm paths available here") {
  MESSAGE("CPU features: " << native::cpu_features_str() << "; bfloat16 GEMM path: "
                           << std::string(native::bf16_gemm_path_name(native::bf16_gemm_path())));
  CHECK(native::bf16_gemm_path_available(Bf16GemmPath::widen));
  CHECK(native::bf16_gemm_path_available(Bf16GemmPath::best));
  if (native::bf16_gemm_path_available(Bf16GemmPath::avx512_bf16)) CHECK(native::has_avx512_bf16());
  if (native::has_avx512_bf16() && native::cpu_isa().avx512bw && native::cpu_isa().avx512vl)
    CHECK(native::bf16_gemm_path_available(Bf16GemmPath::avx512_bf16));
  // The choice is kernel_paths()'s, a function of the features: AVX512_BF16 with BW and VL.
  const char* env = std::getenv("KILN_GEMM_BF16");
  if (!env || !*env)
    CHECK(std::string(native::kernel_paths(native::cpu_isa()).gemm_bf16) ==
          (native::bf16_gemm_path_available(Bf16GemmPath::avx512_bf16) ? "avx512_bf16" : "widen"));
  for (const auto& c : std::vector<std::pair<const char*, const char*>>{
           {"zen4", "avx512_bf16"}, {"sapphire-rapids", "avx512_bf16"}, {"skylake-sp", "widen"},
           {"knl", "widen"}, {"haswell", "widen"}, {"neoverse-v2", "widen"}}) {
    const char *cpu = c.first, *want = c.second;
    CAPTURE(cpu);
    CHECK(std::string(native::kernel_paths(native::cpu_preset(cpu)).gemm_bf16) == want);
  }
  CHECK(std::string(native::kernel_paths(native::cap_isa(native::cpu_preset("zen4"), "avx2")).gemm_bf16) ==
        "widen");
  GemmDesc d;
  d.dtype = DType::bfloat16;
  CHECK(native::supports_gemm(d));
  PathGuard guard;
  native::set_bf16_gemm_path(Bf16GemmPath::best);
  CHECK(native::bf16_gemm_path() != Bf16GemmPath::best);
  CHECK_THROWS_KILN(native::set_bf16_gemm_path(Bf16GemmPath(200)), "set_bf16_gemm_path");
}

TEST_CASE("every bf16 path matches the reference on odd and block-crossing shapes") {
  PathGuard guard;
  std::vector<Case> cases;
  // Tiny, odd k (the last pair half zero), one register tile (12 x 32) and one past it, vectors,
  // and shapes crossing the blocks (k blocks of <= 512 values: 1025 -> 342 + 342 + 341; n blocks
  // of 512 or so with a 1 MiB L2; a transposed A packed 96 rows at a time; C of <= 128 columns
  // reads an untransposed A in place in k blocks of <= 2048, 4097 -> 1366 + 1366 + 1365, the odd
  // last one packed).
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},     {2, 3, 3},     {17, 31, 13}, {12, 32, 16},
                                                            {13, 33, 17},  {1, 100, 7},   {100, 1, 7},  {5, 7, 1},
                                                            {64, 64, 64},  {7, 5, 601},   {193, 65, 40}, {20, 700, 9},
                                                            {100, 70, 1025}, {30, 1100, 35}, {30, 40, 4097},
                                                            {14, 128, 4096}})
    for (const Case& c : transposes(Case{m, n, k, false, false})) cases.push_back(c);
  for (const Case& c : transposes(Case{17, 31, 13, false, false, 3, 0.5, 0.0})) cases.push_back(c);
  for (const Case& c : transposes(Case{37, 45, 71, false, false, 1, 1.5, -0.75})) cases.push_back(c);
  for (const Case& c : transposes(Case{9, 35, 21, false, false, 2, 1.0, 0.5, 3})) cases.push_back(c);
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 40; ++i) {
    Case c{pick(1, 70), pick(1, 90), pick(1, 90), pick(0, 1) == 1, pick(0, 1) == 1, pick(0, 3)};
    const double alphas[] = {1.0, -0.5, 2.0}, betas[] = {0.0, 1.0, 0.25};
    c.alpha = alphas[pick(0, 2)];
    c.beta = betas[pick(0, 2)];
    c.batch = pick(1, 2);
    cases.push_back(c);
  }
  for (Bf16GemmPath p : paths_here()) {
    native::set_bf16_gemm_path(p);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::string path_name = native::bf16_gemm_path_name(p);
      CAPTURE(path_name);
      CAPTURE(threads);
      for (const Case& c : cases) check_case(c);
    }
  }
}

TEST_CASE("bf16 gemm sums small integers exactly on every path") {
  PathGuard guard;
  for (Bf16GemmPath p : paths_here()) {
    native::set_bf16_gemm_path(p);
    const std::string path_name = native::bf16_gemm_path_name(p);
    CAPTURE(path_name);
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{13, 33, 17}, {25, 70, 1}, {50, 600, 1027}, {3, 5, 2}, {13, 60, 4099}})
      for (const Case& c : transposes(Case{m, n, k, false, false, 1}))
        check_case(c, true);
  }
}

TEST_CASE("bf16 gemm gives the same bits for any thread count") {
  PathGuard guard;
  for (Bf16GemmPath p : paths_here()) {
    const std::string path_name = native::bf16_gemm_path_name(p);
    CAPTURE(path_name);
    native::set_bf16_gemm_path(p);
    for (const Case& c : {Case{300, 257, 513, false, true}, Case{70, 700, 33, true, false}}) {
      set_num_threads(1);
      const std::vector<float> one = check_case(c);
      set_num_threads(2);
      const std::vector<float> two = check_case(c);
      CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("bf16 gemm: k = 0 and alpha = 0 only scale C; the epilogue adds the bias and clamps") {
  PathGuard guard;
  for (Bf16GemmPath p : paths_here()) {
    native::set_bf16_gemm_path(p);
    const std::vector<BFloat16> a(6, BFloat16(1.f)), b(6, BFloat16(2.f));
    std::vector<BFloat16> c(4, BFloat16(3.f));
    native::bf16gemm_round(false, false, 2, 2, 0, 1.f, a.data(), 1, b.data(), 2, 0.5f, c.data(), 2);
    for (const BFloat16& x : c) CHECK(float(x) == 1.5f);
    native::bf16gemm_round(false, false, 2, 2, 3, 0.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2);
    for (const BFloat16& x : c) CHECK(float(x) == 0.f);
    // [2 x 3] ones times [3 x 2] twos = 6 everywhere; + bias {1, -10}; relu.
    const float bias[2] = {1.f, -10.f};
    native::Bf16Epilogue epi;
    epi.col_bias = bias;
    epi.relu = true;
    native::bf16gemm_round(false, false, 2, 2, 3, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2, epi);
    CHECK(float(c[0]) == 7.f);
    CHECK(float(c[1]) == 0.f);
    CHECK(float(c[2]) == 7.f);
    CHECK(float(c[3]) == 0.f);
  }
}

TEST_CASE("bf16 gemm with bfloat16 C rounds exactly as BFloat16(float) does, epilogue included") {
  PathGuard guard;
  std::mt19937 rng(3);
  for (Bf16GemmPath p : paths_here()) {
    native::set_bf16_gemm_path(p);
    const std::string path_name = native::bf16_gemm_path_name(p);
    CAPTURE(path_name);
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{7, 37, 19}, {40, 16, 64}, {3, 1, 5}})
      for (float beta : {0.f, 0.75f})
        for (bool relu : {false, true}) {
          const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                   " beta " + std::to_string(beta) + (relu ? " relu" : "");
          CAPTURE(what);
          const int64_t ldc = n + 3;
          const auto a = make(size_t(m * k), rng, false), b = make(size_t(k * n), rng, false);
          const auto c0 = make(size_t(m * ldc), rng, false);
          std::vector<float> bias(static_cast<size_t>(n));
          for (float& x : bias) x = std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng);
          bias[0] = std::numeric_limits<float>::quiet_NaN();  // NaN stays NaN (relu: 0)
          if (n > 2) bias[2] = std::numeric_limits<float>::infinity();
          // The float32 product, then the epilogue in scalar code.
          std::vector<float> f(size_t(m * n));
          native::bf16gemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, f.data(), n);
          std::vector<BFloat16> want = c0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              float v = f[size_t(i * n + j)];
              if (beta != 0.f) v += beta * float(c0[size_t(i * ldc + j)]);
              v += bias[size_t(j)];
              if (relu) v = v > 0.f ? v : 0.f;
              want[size_t(i * ldc + j)] = BFloat16(v);
            }
          std::vector<BFloat16> got = c0;
          native::Bf16Epilogue epi;
          epi.col_bias = bias.data();
          epi.relu = relu;
          native::bf16gemm_round(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, beta, got.data(), ldc, epi);
          for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i].bits == want[i].bits);
        }
  }
}

TEST_CASE("native bf16 linear: three passes against the reference in double") {
  PathGuard guard;
  for (Bf16GemmPath p : paths_here()) {
    native::set_bf16_gemm_path(p);
    const std::string path_name = native::bf16_gemm_path_name(p);
    CAPTURE(path_name);
    for (const auto& [n, ic, oc] : std::vector<std::array<int64_t, 3>>{{5, 7, 9}, {1, 70, 3}, {16, 33, 17}, {3, 129, 1}, {40, 300, 65}})
      for (bool bias : {true, false}) {
        LinearDesc d;
        d.dtype = DType::bfloat16;
        d.n = n, d.ic = ic, d.oc = oc;
        d.has_bias = bias;
        CAPTURE(d.str());
        REQUIRE(native::supports_linear(d));
        std::mt19937 rng(uint32_t(n * 31 + ic * 7 + oc));
        const auto src = make(size_t(n * ic), rng, false), wei = make(size_t(oc * ic), rng, false);
        const auto bs = make(size_t(oc), rng, false), dd = make(size_t(n * oc), rng, false);
        const auto s64 = to_double(src), w64 = to_double(wei), b64 = to_double(bs), dd64 = to_double(dd);
        LinearDesc d64 = d;
        d64.dtype = DType::float64;
        // Tolerance: float32 sums of <= 300 products of magnitude < 1, then one bfloat16 rounding.
        auto close = [](const std::vector<BFloat16>& got, const std::vector<double>& want, int64_t terms) {
          int bad = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double tol = std::ldexp(1.0, -8) * std::fabs(want[i]) + double(terms + 4) * std::ldexp(1.0, -23);
            if (!test::near(double(float(got[i])), want[i], tol) && ++bad <= 3)
              FAIL_CHECK("at " << i << ": got " << float(got[i]) << " want " << want[i]);
          }
          CHECK(bad == 0);
        };
        std::vector<BFloat16> dst(size_t(n * oc));
        std::vector<double> dst64(dst.size());
        native::linear_fwd(d, src.data(), wei.data(), bias ? bs.data() : nullptr, dst.data());
        ref::linear_fwd<double>(d64, s64.data(), w64.data(), bias ? b64.data() : nullptr, dst64.data());
        close(dst, dst64, ic + 1);
        std::vector<BFloat16> ds(size_t(n * ic));
        std::vector<double> ds64(ds.size());
        native::linear_bwd_data(d, dd.data(), wei.data(), ds.data());
        ref::linear_bwd_data<double>(d64, dd64.data(), w64.data(), ds64.data());
        close(ds, ds64, oc);
        std::vector<BFloat16> dw(static_cast<size_t>(oc * ic)), db(static_cast<size_t>(oc));
        std::vector<double> dw64(dw.size()), db64(db.size());
        native::linear_bwd_weights(d, src.data(), dd.data(), dw.data(), bias ? db.data() : nullptr);
        ref::linear_bwd_weights<double>(d64, s64.data(), dd64.data(), dw64.data(), bias ? db64.data() : nullptr);
        close(dw, dw64, n);
        if (bias) close(db, db64, n);
      }
  }
}

TEST_CASE("KILN_GEMM_BF16 forces a path; an unknown one is an error naming it") {
  const char* env = std::getenv("KILN_GEMM_BF16");
  if (env && *env) {  // the runs below (or a caller that forced a path): the path is the forced one
    CHECK(std::string(native::bf16_gemm_path_name(native::bf16_gemm_path())) == env);
    return;
  }
  const std::string self = test::self_command() +
                           " '--source-file=*kernels/test_gemm_bf16.cpp' '--test-case=KILN_GEMM_BF16*' --no-intro 2>&1";
  int rc = 0;
  std::string out = test::run_capture("KILN_GEMM_BF16=widen " + self, &rc);
  CHECK_MESSAGE(rc == 0, out);
  out = test::run_capture("KILN_GEMM_BF16=bogus " + self, &rc);
  CHECK(rc != 0);
  CHECK_MESSAGE(out.find("KILN_GEMM_BF16=bogus") != std::string::npos, out);
}

TEST_CASE("linear op on the CPU: bfloat16 runs as it is on native, forward and backward near float64") {
  Tensor x = test::make_input({9, 70}, 21).to(DType::bfloat16);
  Tensor w = test::make_input({13, 70}, 22).to(DType::bfloat16);
  Tensor b = test::make_input({13}, 23).to(DType::bfloat16);
  Tensor gy = test::make_input({9, 13}, 24).to(DType::bfloat16);
  auto run = [&](DType t, Tensor& gx, Tensor& gw, Tensor& gb) {
    Tensor xi = x.to(t).detach().requires_grad_(true), wi = w.to(t).detach().requires_grad_(true),
           bi = b.to(t).detach().requires_grad_(true);
    Tensor y = ops::linear(xi, wi, bi);
    y.backward(gy.to(t));
    gx = xi.grad(), gw = wi.grad(), gb = bi.grad();
    return y;
  };
  Tensor gx0, gw0, gb0, gx1, gw1, gb1, y0, y1;
  {
    BackendGuard g("ref", true);
    y0 = run(DType::float64, gx0, gw0, gb0);
  }
  {
    BackendGuard g("native", true);  // strict: every op of the pass on native, bfloat16 included
    LinearDesc d;
    d.dtype = DType::bfloat16;
    d.n = 9, d.ic = 70, d.oc = 13;
    d.has_bias = true;
    CHECK(find_kernel<kernel_op::linear_fwd>(DeviceType::cpu, d));  // so ops::linear takes no float32 copies
    CHECK(find_kernel<kernel_op::linear_bwd_data>(DeviceType::cpu, d));
    CHECK(find_kernel<kernel_op::linear_bwd_weights>(DeviceType::cpu, d));
    y1 = run(DType::bfloat16, gx1, gw1, gb1);
  }
  CHECK(y1.dtype() == DType::bfloat16);
  CHECK(gw1.dtype() == DType::bfloat16);
  // Sums of <= 70 products of magnitude < 1 in float32, one bfloat16 rounding (2^-8 relative).
  CHECK_CLOSE(y1.to(DType::float64), y0, 1e-2, 1e-2);
  CHECK_CLOSE(gx1.to(DType::float64), gx0, 1e-2, 1e-2);
  CHECK_CLOSE(gw1.to(DType::float64), gw0, 1e-2, 1e-2);
  CHECK_CLOSE(gb1.to(DType::float64), gb0, 1e-2, 1e-2);
}
