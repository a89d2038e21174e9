// CPUID + XGETBV feature detection on x86 (hand-written because __builtin_cpu_supports does not
// check the OS-enabled register state, XCR0, and AMX needs bits GCC 12 does not know), the
// auxiliary vector on POWER and ARM; the KILN_CPU_ISA cap; the CPU presets; and the choice of
// kernel per op family.
#include "kernels/cpu/native/cpu_features.h"

#include <cstdint>
#include <cstdlib>

#include <unistd.h>

#include "kernels/common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#elif defined(__powerpc64__) && defined(__linux__)
#include <asm/cputable.h>  // PPC_FEATURE_HAS_VSX
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>  // HWCAP_ASIMD, HWCAP_SVE
#include <sys/auxv.h>
#include <sys/prctl.h>  // PR_SVE_GET_VL
#endif

namespace kiln::native {
namespace {

#ifdef KILN_X86
uint64_t xgetbv0() {
  uint32_t lo, hi;
  // xgetbv with ecx=0 reads XCR0; encoded as bytes so no -mxsave is needed for this file.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuIsa detect() {
  CpuIsa i;
  i.arch = CpuArch::x86_64;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return i;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), avx = c & (1u << 28);
  if (!osxsave || !avx) return i;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG, XTILEDATA
  // Linux hides a flag in /proc/cpuinfo when the OS does not save its state, as here.
  i.fma = ymm_os && fma;
  if (__get_cpuid_max(0, nullptr) < 7) return i;
  unsigned a7, b7, c7, d7;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  i.avx2 = ymm_os && (b7 & (1u << 5));
  i.avx512f = zmm_os && (b7 & (1u << 16));
  i.avx512dq = zmm_os && (b7 & (1u << 17));
  i.avx512bw = zmm_os && (b7 & (1u << 30));
  i.avx512vl = zmm_os && (b7 & (1u << 31));
  unsigned a71 = 0, b71, c71, d71;
  if (a7 >= 1) __cpuid_count(7, 1, a71, b71, c71, d71);
  i.avx512_bf16 = zmm_os && (a71 & (1u << 5));
  i.amx_bf16 = amx_os && (d7 & (1u << 22));
  i.amx_tile = amx_os && (d7 & (1u << 24));
  i.amx_int8 = amx_os && (d7 & (1u << 25));
  return i;
}
#elif defined(__powerpc64__) && defined(__linux__)
CpuIsa detect() {
  CpuIsa i;
  i.arch = CpuArch::ppc64le;
  i.vsx = getauxval(AT_HWCAP) & PPC_FEATURE_HAS_VSX;
  return i;
}
#elif defined(__aarch64__) && defined(__linux__)
CpuIsa detect() {
  CpuIsa i;
  i.arch = CpuArch::aarch64;
  const unsigned long hw = getauxval(AT_HWCAP);
  i.asimd = hw & HWCAP_ASIMD;
#if defined(HWCAP_SVE) && defined(PR_SVE_GET_VL)
  if (hw & HWCAP_SVE) {
    const int vl = prctl(PR_SVE_GET_VL);  // bytes in the low bits, flags above
    if (vl > 0) {
      i.sve = true;
      i.sve_bits = (vl & PR_SVE_VL_LEN_MASK) * 8;
    }
  }
#endif
  return i;
}
#else
CpuIsa detect() { return CpuIsa{build_arch()}; }
#endif

const char* env_cpu_isa() { return std::getenv("KILN_CPU_ISA"); }

}  // namespace

const char* cpu_arch_name(CpuArch a) {
  switch (a) {
    case CpuArch::x86_64: return "x86-64";
    case CpuArch::ppc64le: return "ppc64le";
    case CpuArch::aarch64: return "aarch64";
    case CpuArch::other: break;
  }
  return "other";
}

CpuArch build_arch() {
#if defined(__x86_64__)
  return CpuArch::x86_64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return CpuArch::ppc64le;
#elif defined(__aarch64__)
  return CpuArch::aarch64;
#else
  return CpuArch::other;
#endif
}

const char* cpu_isa_levels(CpuArch a) {
  switch (a) {
    case CpuArch::x86_64: return "avx512, avx2, portable";
    case CpuArch::ppc64le: return "vsx, portable";
    case CpuArch::aarch64: return "sve, neon, portable";
    case CpuArch::other: break;
  }
  return "portable";
}

CpuIsa cap_isa(CpuIsa i, const std::string& level) {
  if (level.empty() || level == "auto") return i;
  auto no_avx512 = [&] {
    i.avx512f = i.avx512bw = i.avx512vl = i.avx512dq = i.avx512_bf16 = false;
    i.amx_tile = i.amx_bf16 = i.amx_int8 = false;
  };
  bool known = level == "portable";
  if (i.arch == CpuArch::x86_64) {
    known = known || level == "avx512" || level == "avx2";
    if (level != "avx512") no_avx512();
    if (level == "portable") i.fma = i.avx2 = false;
  } else if (i.arch == CpuArch::ppc64le) {
    known = known || level == "vsx";
    if (level == "portable") i.vsx = false;
  } else if (i.arch == CpuArch::aarch64) {
    known = known || level == "sve" || level == "neon";
    if (level != "sve") i.sve = false, i.sve_bits = 0;
    if (level == "portable") i.asimd = false;
  }
  KILN_CHECK(known, "KILN_CPU_ISA=", level, ": not an ISA level of ", cpu_arch_name(i.arch), " (",
             cpu_isa_levels(i.arch), ", or auto)");
  return i;
}

const CpuIsa& cpu_isa_detected() {
  static const CpuIsa i = detect();
  return i;
}

std::string cpu_isa_cap() {
  const char* e = env_cpu_isa();
  return e && *e ? e : "auto";
}

const CpuIsa& cpu_isa() {
  static const CpuIsa i = cap_isa(cpu_isa_detected(), cpu_isa_cap());
  return i;
}

const char* cpu_preset_names() {
  return "knl, haswell, skylake-sp, sapphire-rapids, zen4, power8, neoverse-v1, neoverse-v2, a64fx";
}

CpuIsa cpu_preset(const std::string& name) {
  CpuIsa i;
  auto x86 = [&](bool avx512) {
    i.arch = CpuArch::x86_64;
    i.fma = i.avx2 = true;
    i.avx512f = i.avx512bw = i.avx512vl = i.avx512dq = avx512;
  };
  auto arm = [&](int sve_bits) {
    i.arch = CpuArch::aarch64;
    i.asimd = true;
    i.sve = sve_bits > 0;
    i.sve_bits = sve_bits;
  };
  if (name == "knl") {  // Xeon Phi 7250: AVX-512 F, CD, ER, PF; no BW, VL, DQ
    x86(false);
    i.avx512f = true;
  } else if (name == "haswell") {  // also Broadwell: AVX2 + FMA
    x86(false);
  } else if (name == "skylake-sp") {
    x86(true);
  } else if (name == "sapphire-rapids") {
    x86(true);
    i.avx512_bf16 = i.amx_tile = i.amx_bf16 = i.amx_int8 = true;
  } else if (name == "zen4") {
    x86(true);
    i.avx512_bf16 = true;
  } else if (name == "power8") {
    i.arch = CpuArch::ppc64le;
    i.vsx = true;
  } else if (name == "neoverse-v1") {  // Graviton3
    arm(256);
  } else if (name == "neoverse-v2") {  // Grace
    arm(128);
  } else if (name == "a64fx") {
    arm(512);
  } else {
    KILN_THROW("unknown CPU preset '", name, "' (", cpu_preset_names(), ")");
  }
  return i;
}

// SVE pays over NEON only where its vectors are wider than NEON's 128 bits; the SVE GEMM has
// register tiles for 256- and 512-bit vectors (gemm_sve.cpp).
KernelPaths kernel_paths(const CpuIsa& i) {
  KernelPaths p{"eigen", "baseline", "none", "baseline", "widen"};
  switch (i.arch) {
    case CpuArch::x86_64:
      if (i.avx512f) p.gemm = p.conv_depthwise = "avx512";
      else if (i.avx2 && i.fma) p.gemm = p.conv_depthwise = "avx2";
      if (i.amx_tile && i.amx_bf16) p.bf16 = "amx";
      else if (i.avx512_bf16) p.bf16 = "avx512_bf16";
      if (i.avx512_bf16 && i.avx512bw && i.avx512vl) p.gemm_bf16 = "avx512_bf16";
      break;
    case CpuArch::ppc64le:
      if (i.vsx) p.gemm = "vsx";
      break;
    case CpuArch::aarch64:
      if (i.sve && (i.sve_bits == 256 || i.sve_bits == 512)) p.gemm = "sve";
      else if (i.asimd) p.gemm = "neon";
      if (i.sve && i.sve_bits >= 256) p.conv_depthwise = "sve";
      break;
    case CpuArch::other: break;
  }
  return p;
}

bool has_avx2() { return cpu_isa().avx2 && cpu_isa().fma; }
bool has_avx512f() { return cpu_isa().avx512f; }
bool has_avx512_core() {
  const CpuIsa& i = cpu_isa();
  return i.avx512f && i.avx512dq && i.avx512bw && i.avx512vl && has_avx2();
}
bool has_avx512_bf16() { return cpu_isa().avx512f && cpu_isa().avx512_bf16; }
bool has_amx() { return cpu_isa().amx_tile && cpu_isa().amx_bf16; }

// glibc answers these from CPUID leaf 4 / 0x8000001D on x86 and from sysfs elsewhere.
long l1d_cache_bytes() {
#ifdef _SC_LEVEL1_DCACHE_SIZE
  static const long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  return v > 0 ? v : 0;
#else
  return 0;
#endif
}

long l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  static const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return v > 0 ? v : 0;
#else
  return 0;
#endif
}

std::string cpu_features_str() {
  const CpuIsa& i = cpu_isa();
  std::string s;
  auto add = [&](bool on, const std::string& name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(has_avx2(), "avx2");
  add(has_avx512f(), "avx512f");
  add(has_avx512_core(), "avx512_core");
  add(has_avx512_bf16(), "avx512_bf16");
  add(has_amx(), "amx");
  add(i.vsx, "vsx");
  add(i.asimd, "neon");
  add(i.sve, "sve" + std::to_string(i.sve_bits));
  return s.empty() ? "none" : s;
}

}  // namespace kiln::native
