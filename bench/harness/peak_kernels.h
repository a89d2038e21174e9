// The inner loops of the peak measurement (bench/harness/peak.h), one per ISA, each in its own
// translation unit compiled for that ISA (bench/CMakeLists.txt) and called only where the CPU
// has it (kernels/cpu/native/cpu_features.h). Each runs `steps` steps of independent
// multiply-add chains, enough of them to cover the FMA latency times the FMA ports (Zen 4 and
// Skylake-SP: 4 cycles x 2 ports), and returns a sum of the accumulators so that no chain can be
// dropped. The float32 loops step acc = acc * a + b with a and b arguments (never constants the
// compiler could fold: a multiply by 1 would go): the measurement passes a < 1, so the chains
// converge and no value overflows or turns denormal however long they run; count_flops_per_step
// (peak.h) passes a = 1, b = 2^-20, so each lane adds exactly b a step and the result counts the
// multiply-adds done. The bfloat16 loop ignores a and b: each lane adds 2 x 2^-20 a step, which
// counts its FLOPs the same way.
//   build/bench/bench_peak            ctest --test-dir build -R bench.test_peak
#pragma once

#include <cstdint>

namespace kiln::bench::peak_detail {

// FLOPs one step of each loop does (an FMA lane is two).
constexpr double kFlopsPerStepAvx512 = 16 * 16 * 2;      // 16 zmm accumulators x 16 floats
constexpr double kFlopsPerStepAvx512Bf16 = 16 * 32 * 2;  // 16 vdpbf16ps x 32 bf16 products
constexpr double kFlopsPerStepAvx2 = 12 * 8 * 2;         // 12 ymm accumulators x 8 floats
constexpr double kFlopsPerStepPortable = 16 * 8 * 2;     // 16 x 8 floats, vectorised by the compiler

// Whether this build compiled the loop (false off x86-64); the CPU must still have the ISA.
bool built_avx512();
bool built_avx512_bf16();
bool built_avx2();

float fma_avx512(int64_t steps, float a, float b);
float dpbf16_avx512(int64_t steps, float a, float b);
float fma_avx2(int64_t steps, float a, float b);
float fma_portable(int64_t steps, float a, float b);

}  // namespace kiln::bench::peak_detail
