// The recurrent gate loops compiled for AVX-512F (CMake gives *_avx512.cpp the flags); chosen at
// run time by rnn_gates.cpp when the CPU has it. See rnn_gates.h.
//   Test: ctest --test-dir build -R 'oracle$|rnn'
#include <cstdint>

#include "kernels/cpu/native/rnn_gates.h"

namespace kiln::native::rnn_gates_avx512 {
#include "kernels/cpu/native/rnn_gates_kernels.inc"
}  // namespace kiln::native::rnn_gates_avx512
