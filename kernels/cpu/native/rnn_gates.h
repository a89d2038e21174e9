// Internal to the native recurrent kernels (rnn.cpp): the gate passes of one time step, forward
// (rnn::StepFwd) and backward (rnn::StepBwd), row block by row block instead of element by
// element. The per-element definition stays rnn::apply (kernels/common/rnn.h, which the CUDA
// kernels run); here each (row, block of columns) decides `active` once and runs tight loops
// with kiln's own exp, sigmoid and tanh (rnn_gates_kernels.inc, a few ulp from libm's), which
// GCC vectorises. The loops are compiled for AVX-512F (rnn_gates_avx512.cpp), AVX2 + FMA
// (rnn_gates_avx2.cpp) and the build's baseline (rnn_gates.cpp), and picked at run time from the
// CPU's features after KILN_CPU_ISA, like the GEMM (cpu_features.h). The work is split over the
// OpenMP team by (row, column block) pairs, so a small batch of a wide layer still uses every
// thread; a small step runs serially. float32. Thread-safe.
//   ctest --test-dir build -R 'oracle$|rnn'     ./build/tools/kiln bench --model lstm-h1024-t25 --backend native
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/rnn.h"

namespace kiln::native {

// rnn::apply(a, i) for every i in [0, N * H), in parallel.
void rnn_gates_fwd(const rnn::StepFwd<float>& a);
void rnn_gates_bwd(const rnn::StepBwd<float>& a);

// The loops in use: "avx512", "avx2", "baseline" (the build's own target), or "generic"
// (rnn::apply per element, the definition, for comparisons). set_rnn_gates_path takes one of
// those or "auto" (the CPU's best) and throws kiln::Error on another name or a path this CPU
// lacks; it is meant for tests and benchmarks, not to be called while a recurrent kernel runs.
const char* rnn_gates_path();
void set_rnn_gates_path(const std::string& name);

// One build of the loops: the gates of row n, columns [j0, j1).
#define KILN_RNN_GATES_DECLARE(ns)                                                          \
  namespace ns {                                                                            \
  void step_fwd_block(const rnn::StepFwd<float>& a, int64_t n, int64_t j0, int64_t j1);   \
  void step_bwd_block(const rnn::StepBwd<float>& a, int64_t n, int64_t j0, int64_t j1);   \
  }
KILN_RNN_GATES_DECLARE(rnn_gates_base)
KILN_RNN_GATES_DECLARE(rnn_gates_avx512)
KILN_RNN_GATES_DECLARE(rnn_gates_avx2)
#undef KILN_RNN_GATES_DECLARE

}  // namespace kiln::native
