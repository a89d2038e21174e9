// CPUID + XGETBV feature detection. Hand-written because __builtin_cpu_supports does not check the
// OS-enabled register state (XCR0), and AMX needs bits it does not know in GCC 12.
#include "kernels/cpu/native/cpu_features.h"

#include <cstdint>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#elif defined(__powerpc64__) && defined(__linux__)
#include <asm/cputable.h>  // PPC_FEATURE_HAS_VSX
#include <sys/auxv.h>
#endif

namespace kiln::native {
namespace {

struct Features {
  bool avx2 = false, avx512f = false, avx512_core = false, avx512_bf16 = false, amx = false;
  CpuIsa isa;
};

#ifdef KILN_X86
uint64_t xgetbv0() {
  uint32_t lo, hi;
  // xgetbv with ecx=0 reads XCR0; encoded as bytes so no -mxsave is needed for this file.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

Features detect() {
  Features f;
  CpuIsa& i = f.isa;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG, XTILEDATA
  // Linux hides a flag in /proc/cpuinfo when the OS does not save its state, as here.
  i.fma = ymm_os && fma;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
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
  f.avx2 = i.avx2 && i.fma;
  f.avx512f = i.avx512f;
  f.avx512_core = f.avx512f && i.avx512dq && i.avx512bw && i.avx512vl && f.avx2;
  f.avx512_bf16 = f.avx512f && i.avx512_bf16;
  f.amx = i.amx_tile && i.amx_bf16;
  return f;
}
#elif defined(__powerpc64__) && defined(__linux__)
Features detect() {
  Features f;
  f.isa.vsx = getauxval(AT_HWCAP) & PPC_FEATURE_HAS_VSX;
  return f;
}
#else
Features detect() { return Features{}; }
#endif

const Features& features() {
  static const Features f = detect();
  return f;
}

}  // namespace

bool has_avx2() { return features().avx2; }
bool has_avx512f() { return features().avx512f; }
bool has_avx512_core() { return features().avx512_core; }
bool has_avx512_bf16() { return features().avx512_bf16; }
bool has_amx() { return features().amx; }
const CpuIsa& cpu_isa() { return features().isa; }

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
  const Features& f = features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.avx512f, "avx512f");
  add(f.avx512_core, "avx512_core");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.amx, "amx");
  return s.empty() ? "none" : s;
}

}  // namespace kiln::native
