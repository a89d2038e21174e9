// What the CPU running kiln can do, for run-time kernel dispatch (the *_avx2.cpp / *_avx512.cpp
// files are compiled for their ISA and may only run where these say yes). Each answer needs both
// the CPUID feature bit and the OS saving the register state (XGETBV), is computed once, and is
// false on non-x86 builds. Thread-safe.
//   ctest --test-dir build -R test_gemm   (prints the features it found)
#pragma once

#include <string>

namespace kiln::native {

bool has_avx2();          // AVX2 + FMA, ymm state enabled by the OS
bool has_avx512f();       // AVX-512 Foundation, zmm and opmask state enabled by the OS
bool has_avx512_core();   // F + BW + DQ + VL (Skylake-SP level): what *_avx512.cpp is compiled for
bool has_avx512_bf16();   // AVX512_BF16 (Cooper Lake, Sapphire Rapids)
bool has_amx();           // AMX-TILE + AMX-BF16 with tile data state enabled by the OS (Linux also
                          // needs arch_prctl(ARCH_REQ_XCOMP_PERM) before first use)

// Per-core data cache sizes in bytes (L1d, L2), 0 when unknown. For cache blocking.
long l1d_cache_bytes();
long l2_cache_bytes();

// The individual ISA extensions behind the answers above, each usable (CPUID bit and, for AVX*/AMX,
// the OS saving its register state), named as Linux's /proc/cpuinfo "flags" name them. `kiln
// info` reports them. On POWER, vsx comes from the auxiliary vector (AT_HWCAP); x86 fields are
// false there, and vsx is false on x86.
struct CpuIsa {
  bool fma = false, avx2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool vsx = false;
};
const CpuIsa& cpu_isa();

// "avx2 avx512f avx512_core avx512_bf16 amx" style summary of what is present.
std::string cpu_features_str();

}  // namespace kiln::native
