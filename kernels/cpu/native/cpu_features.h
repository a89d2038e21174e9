// What the CPU running kiln can do, and which native kernel each op family takes on it.
//
// Detection: each x86 answer needs both the CPUID bit and the OS saving the register state
// (XGETBV); POWER and ARM answers come from the auxiliary vector (AT_HWCAP) and, for SVE, the
// kernel's vector length (prctl). Computed once; thread-safe.
//
// Selection is a pure function of a feature set (kernel_paths), so a test can ask what a Knights
// Landing, a Haswell or a POWER8 would take without being one. The *_avx512.cpp / *_avx2.cpp /
// *_vsx.cpp / *_neon.cpp / *_sve.cpp files are compiled for their ISA (CMakeLists.txt) and only
// run where the features say yes.
//
// KILN_CPU_ISA caps the ISA (like oneDNN's ONEDNN_MAX_CPU_ISA, which it also sets): on x86-64
// avx512 | avx2 | portable, on POWER vsx | portable, on ARM64 sve | neon | portable; unset or
// "auto" for no cap. Capped features read as absent everywhere in kiln, `kiln info` included.
//   ctest --test-dir build -R "kernels.test_cpu_isa|kernels.test_gemm"     kiln info
#pragma once

#include <string>

namespace kiln::native {

enum class CpuArch : unsigned char { x86_64, ppc64le, aarch64, other };
const char* cpu_arch_name(CpuArch a);
CpuArch build_arch();  // the architecture this build targets

// The ISA extensions kiln's kernels care about, each usable (CPUID bit and, for AVX*/AMX, the OS
// saving its register state), named as Linux's /proc/cpuinfo "flags" name them (asimd is NEON).
// Fields of other architectures are false.
struct CpuIsa {
  CpuArch arch = CpuArch::other;
  bool fma = false, avx2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool vsx = false;                 // POWER7+ vector-scalar (POWER8 and later for this build)
  bool asimd = false, sve = false;  // ARM64 NEON; SVE
  int sve_bits = 0;                 // SVE vector length the process runs with
};

// The features of this CPU, with KILN_CPU_ISA's cap applied; throws kiln::Error on a
// KILN_CPU_ISA that names no ISA of this architecture.
const CpuIsa& cpu_isa();
const CpuIsa& cpu_isa_detected();  // without the cap
// `isa` with everything above `level` cleared ("auto" or "" clears nothing). Throws kiln::Error
// naming the levels of isa.arch when `level` is not one of them.
CpuIsa cap_isa(CpuIsa isa, const std::string& level);
const char* cpu_isa_levels(CpuArch a);  // "avx512, avx2, portable" ...
std::string cpu_isa_cap();              // KILN_CPU_ISA as applied ("auto" when unset)

// Named feature sets of the CPUs HPC centres run, for tests and for `kiln info --cpu NAME`-style
// questions: knl, haswell, skylake-sp, sapphire-rapids, zen4, power8, neoverse-v1 (SVE 256),
// neoverse-v2 (Grace: SVE2 128), a64fx (SVE 512). Throws kiln::Error on another name.
CpuIsa cpu_preset(const std::string& name);
const char* cpu_preset_names();

// The kernel each native op family takes on a CPU with `isa` (whatever this build contains: a
// path of another architecture is named all the same).
struct KernelPaths {
  const char* gemm;            // float32 GEMM (linear, matmul, and convolution via im2col):
                               // avx512 (AVX-512F), avx2, vsx, neon, sve, or eigen (portable)
  const char* conv_depthwise;  // direct depthwise loops: avx512, avx2, sve, or baseline
                               // (compiled for the build's own target: SSE2, POWER8 VSX, NEON)
  const char* bf16;            // bfloat16 conv/matmul through oneDNN: amx, avx512_bf16, or
                               // "none" (bfloat16 falls back to float32 compute)
  const char* elementwise;     // elementwise, norm, pool, optimiser loops: always "baseline"
  const char* gemm_bf16;       // kiln's own bfloat16 GEMM (gemm_bf16.h: native bfloat16 gemm,
                               // linear, channels-last conv): avx512_bf16 (AVX512_BF16 with
                               // AVX-512BW/VL; also on AMX CPUs, no AMX kernel of its own) or
                               // widen (float32 GEMM on widened copies)
};
KernelPaths kernel_paths(const CpuIsa& isa);

bool has_avx2();         // AVX2 + FMA (after the cap)
bool has_avx512f();      // AVX-512 Foundation: all kiln's AVX-512 kernels need (Knights Landing has it)
bool has_avx512_core();  // F + BW + DQ + VL (Skylake-SP level)
bool has_avx512_bf16();  // AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4)
bool has_amx();          // AMX-TILE + AMX-BF16 (Linux also needs arch_prctl(ARCH_REQ_XCOMP_PERM))

// Per-core data cache sizes in bytes (L1d, L2), 0 when unknown. For cache blocking.
long l1d_cache_bytes();
long l2_cache_bytes();

// "avx2 avx512f avx512_core avx512_bf16 amx" style summary of what is present (after the cap).
std::string cpu_features_str();

}  // namespace kiln::native
