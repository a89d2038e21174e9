// CPUID + XGETBV feature detection. Hand-written because __builtin_cpu_supports does not check the
// OS-enabled register state (XCR0), and AMX needs bits it does not know in GCC 12.
#include "kernels/cpu/native/cpu_features.h"

#include <cstdint>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#endif

namespace kiln::native {
namespace {

struct Features {
  bool avx2 = false, avx512f = false, avx512_core = false, avx512_bf16 = false, amx = false;
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
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG, XTILEDATA
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  unsigned a7, b7, c7, d7;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  f.avx2 = ymm_os && fma && (b7 & (1u << 5));
  f.avx512f = zmm_os && (b7 & (1u << 16));
  const bool dq = b7 & (1u << 17), bw = b7 & (1u << 30), vl = b7 & (1u << 31);
  f.avx512_core = f.avx512f && dq && bw && vl && f.avx2;
  unsigned a71 = 0, b71, c71, d71;
  if (a7 >= 1) __cpuid_count(7, 1, a71, b71, c71, d71);
  f.avx512_bf16 = f.avx512f && (a71 & (1u << 5));
  const bool amx_bf16 = d7 & (1u << 22), amx_tile = d7 & (1u << 24);
  f.amx = amx_os && amx_tile && amx_bf16;
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
