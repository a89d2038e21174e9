// The recurrent gate loops compiled for AVX2 + FMA (CMake gives *_avx2.cpp the flags); chosen at
// run time by rnn_gates.cpp when the CPU has them and not AVX-512. See rnn_gates.h.
//   Test: ctest --test-dir build -R 'oracle$|rnn'
#include <cstdint>

#include "kernels/cpu/native/rnn_gates.h"

namespace kiln::native::rnn_gates_avx2 {
#include "kernels/cpu/native/rnn_gates_kernels.inc"
}  // namespace kiln::native::rnn_gates_avx2
