// Which native kernel each op family takes on each CPU the centres run, from its feature set alone
// (kernel_paths on the presets: Knights Landing, Haswell/Broadwell, Skylake-SP, Sapphire Rapids,
// Zen 4, POWER8, Neoverse V1/V2, A64FX), with KILN_CPU_ISA's caps; then the chosen GEMM and
// depthwise kernels run against the reference in double wherever this CPU and build can run them.
// CTest also runs this file and the kernel tests under each KILN_CPU_ISA level of the build's
// architecture (kernels.isa_cap_*), where the last case checks the cap took effect.
//   ctest --test-dir build -R "kernels.test_cpu_isa|kernels.isa_cap"
#include "tests/support/testing.h"

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/cpu_features.h"
#include "kernels/cpu/native/gemm.h"
#include "kernels/cpu/ref/conv.h"

using namespace kiln;
using native::CpuIsa;
using native::GemmPath;

namespace {

struct Expect {
  const char* cpu;
  const char* cap;
  const char* gemm;
  const char* conv_depthwise;
  const char* bf16;
};

// What each CPU's features select, capped or not. The paths are the same whatever this build
// is: an x86-64 build answers for POWER8 too.
const Expect kExpected[] = {
    {"knl", "auto", "avx512", "avx512", "none"},  // AVX-512F alone is enough for every AVX-512 kernel
    {"knl", "avx2", "avx2", "avx2", "none"},
    {"haswell", "auto", "avx2", "avx2", "none"},
    {"haswell", "portable", "eigen", "baseline", "none"},
    {"skylake-sp", "auto", "avx512", "avx512", "none"},
    {"sapphire-rapids", "auto", "avx512", "avx512", "amx"},
    {"sapphire-rapids", "avx2", "avx2", "avx2", "none"},
    {"zen4", "auto", "avx512", "avx512", "avx512_bf16"},
    {"zen4", "avx512", "avx512", "avx512", "avx512_bf16"},
    {"power8", "auto", "vsx", "baseline", "none"},
    {"power8", "portable", "eigen", "baseline", "none"},
    {"neoverse-v1", "auto", "sve", "sve", "none"},   // SVE 256
    {"neoverse-v1", "neon", "neon", "baseline", "none"},
    {"neoverse-v2", "auto", "neon", "baseline", "none"},  // SVE2 at 128 bits: NEON's width
    {"a64fx", "auto", "sve", "sve", "none"},         // SVE 512
    {"a64fx", "portable", "eigen", "baseline", "none"},
};

GemmPath gemm_path_named(const std::string& name) {
  for (GemmPath p : {GemmPath::avx512, GemmPath::avx2, GemmPath::vsx, GemmPath::neon, GemmPath::sve, GemmPath::eigen,
                     GemmPath::ref})
    if (name == native::gemm_path_name(p)) return p;
  FAIL("no GEMM path named " << name);
  return GemmPath::ref;
}

// C = A B (+ transposes) on the current GEMM path against a double-precision product.
void check_gemm_here(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  std::mt19937 rng(uint32_t(m * 131 + n * 7 + k));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n), 0.f);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  native::sgemm(ta, tb, m, n, k, 1.f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.f, c.data(), n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double e = 0;
      for (int64_t p = 0; p < k; ++p)
        e += double(a[size_t(ta ? p * m + i : i * k + p)]) * double(b[size_t(tb ? j * k + p : p * n + j)]);
      const double got = c[size_t(i * n + j)];
      if (!(std::abs(got - e) <= 1e-5 * std::sqrt(double(k)) * (1 + std::abs(e)))) {
        FAIL_CHECK("C(" << i << ", " << j << ") of " << m << "x" << n << "x" << k << ": " << got << " vs " << e);
        return;
      }
    }
}

// A 3x3 depthwise forward pass on the current depthwise path against ref in double.
void check_depthwise_here(bool nhwc) {
  ConvDesc d;
  d.N = 2, d.C = d.K = d.groups = 5, d.H = 9, d.W = 7, d.R = d.S = 3, d.pad_h = d.pad_w = 1, d.has_bias = true;
  d.nhwc = nhwc;
  d.set_output_size();
  std::vector<double> x = test::make_input({d.src_elems()}, 1).to_vector(),
                      w = test::make_input({d.wei_elems()}, 2).to_vector(), b = test::make_input({d.K}, 3).to_vector();
  std::vector<double> y(size_t(d.dst_elems()));
  ConvDesc dd = d;
  dd.dtype = DType::float64;
  ref::conv2d_fwd<double>(dd, x.data(), w.data(), b.data(), y.data());
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(b.begin(), b.end()),
      yf(size_t(d.dst_elems()), -7.f);
  native::conv2d_fwd(d, xf.data(), wf.data(), bf.data(), yf.data());
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::abs(yf[i] - y[i]) <= 1e-5 * (1 + std::abs(y[i])))) {
      FAIL_CHECK("depthwise " << (nhwc ? "NHWC" : "NCHW") << " dst[" << i << "]: " << yf[i] << " vs " << y[i]);
      return;
    }
}

}  // namespace

TEST_CASE("each CPU's feature set selects its kernels, with and without KILN_CPU_ISA caps") {
  for (const Expect& e : kExpected) {
    CAPTURE(std::string(e.cpu) + " capped at " + e.cap);
    const native::KernelPaths p = native::kernel_paths(native::cap_isa(native::cpu_preset(e.cpu), e.cap));
    CHECK(std::string(p.gemm) == e.gemm);
    CHECK(std::string(p.conv_depthwise) == e.conv_depthwise);
    CHECK(std::string(p.bf16) == e.bf16);
    CHECK(std::string(p.elementwise) == "baseline");
  }
  // Knights Landing's AVX-512 lacks BW, VL and DQ: the preset says so, and still takes avx512.
  const CpuIsa knl = native::cpu_preset("knl");
  CHECK((knl.avx512f && !knl.avx512bw && !knl.avx512vl && !knl.avx512dq));
}

TEST_CASE("KILN_CPU_ISA levels and CPU presets outside the list are errors naming the choices") {
  CHECK_THROWS_KILN(native::cap_isa(native::cpu_preset("haswell"), "vsx"),
                    "KILN_CPU_ISA=vsx: not an ISA level of x86-64 (avx512, avx2, portable, or auto)");
  CHECK_THROWS_KILN(native::cap_isa(native::cpu_preset("power8"), "avx2"),
                    "not an ISA level of ppc64le (vsx, portable, or auto)");
  CHECK_THROWS_KILN(native::cap_isa(native::cpu_preset("a64fx"), "quantum"),
                    "not an ISA level of aarch64 (sve, neon, portable, or auto)");
  CHECK_THROWS_KILN(native::cpu_preset("pentium4"), "unknown CPU preset 'pentium4' (knl, haswell");
}

TEST_CASE("the kernels each CPU would take run against the reference wherever this machine can run them") {
  const GemmPath gemm_before = native::gemm_path();
  const int threads = num_threads();
  struct Restore {
    GemmPath gemm;
    int threads;
    ~Restore() {
      native::set_gemm_path(gemm);
      native::set_conv_depthwise_path("auto");
      set_num_threads(threads);
    }
  } restore{gemm_before, threads};
  int ran = 0;
  for (const char* cpu : {"knl", "haswell", "skylake-sp", "sapphire-rapids", "zen4", "power8", "neoverse-v1",
                          "neoverse-v2", "a64fx"}) {
    const native::KernelPaths p = native::kernel_paths(native::cpu_preset(cpu));
    CAPTURE(std::string(cpu) + ": gemm " + p.gemm + ", depthwise " + p.conv_depthwise);
    const GemmPath g = gemm_path_named(p.gemm);
    const bool gemm_here = native::gemm_path_available(g);
    const bool dw_here = native::conv_depthwise_path_available(p.conv_depthwise);
    const std::string here = " (runs here)", not_here = " (not on this CPU or build)";
    MESSAGE((std::string(cpu) + ": gemm " + p.gemm + (gemm_here ? here : not_here) + ", depthwise " +
             p.conv_depthwise + (dw_here ? here : not_here)));
    if (gemm_here) {
      native::set_gemm_path(g);
      for (int nt : {1, 2}) {
        set_num_threads(nt);
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            check_gemm_here(37, 45, 70, ta, tb);    // edge tiles in both directions
            check_gemm_here(130, 300, 257, ta, tb);  // several cache blocks, packed A
            check_gemm_here(9, 40, 600, ta, tb);    // narrow C: A read in place, long k
          }
      }
      ++ran;
    }
    if (dw_here) {
      native::set_conv_depthwise_path(p.conv_depthwise);
      check_depthwise_here(false);
      check_depthwise_here(true);
      ++ran;
    }
  }
  // This machine's own choice is always runnable here.
  const native::KernelPaths own = native::kernel_paths(native::cpu_isa());
  CHECK(native::conv_depthwise_path_available(own.conv_depthwise));
  if (std::string(own.gemm) != "eigen") CHECK(native::gemm_path_available(gemm_path_named(own.gemm)));
  MESSAGE(("ran " + std::to_string(ran) + " preset kernel choices here; this CPU (" + native::cpu_features_str() +
           ") takes gemm " + own.gemm + ", depthwise " + own.conv_depthwise));
}

TEST_CASE("the KILN_CPU_ISA cap of this process is what every kernel choice sees") {
  const std::string cap = native::cpu_isa_cap();
  const CpuIsa capped = native::cap_isa(native::cpu_isa_detected(), cap);
  const CpuIsa& seen = native::cpu_isa();
  CHECK(seen.avx2 == capped.avx2);
  CHECK(seen.avx512f == capped.avx512f);
  CHECK(seen.amx_tile == capped.amx_tile);
  CHECK(seen.vsx == capped.vsx);
  CHECK(seen.asimd == capped.asimd);
  CHECK(seen.sve == capped.sve);
  const native::KernelPaths p = native::kernel_paths(seen);
  MESSAGE(("KILN_CPU_ISA=" + cap + ": gemm " + native::gemm_path_name(native::gemm_path()) + ", depthwise " +
           native::conv_depthwise_path()));
  const char* forced = std::getenv("KILN_GEMM");
  if (!forced || !*forced) {
    // The eigen path is the portable one; a build without Eigen falls to ref.
    const std::string want = p.gemm;
    const std::string got = native::gemm_path_name(native::gemm_path());
    CHECK((got == want || (want == "eigen" && got == "ref")));
  }
  CHECK(std::string(native::conv_depthwise_path()) == p.conv_depthwise);
  if (cap == "avx2") CHECK((!native::has_avx512f() && !native::has_amx()));
  if (cap == "portable") {
    CHECK(!native::has_avx2());
    CHECK(std::string(p.gemm) == "eigen");
  }
}
