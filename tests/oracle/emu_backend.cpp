// kiln's own CUDA kernels compiled against the emulator (kiln_cuda_emu: KILN_CUDA_EMU, so
// kiln::cuda is the emulated build, kernels/cuda/namespace.h) as backend "emu" on the CPU: the
// emulator's device memory is host memory, so the oracle hands them host buffers of exactly the
// requested bytes and AddressSanitizer (KILN_EMU_ASAN) sees an access one element past the end.
// The list is the device build's own (engine/backends/cuda_native_kernels.inc), so the oracle's
// problem tables check on every machine the kernels a GPU runs (docs/architecture.md "GPU code
// without a GPU in CI"). Built only into kiln_tests_oracle_emu: ctest -R oracle_emu (label emu).
#include "tests/oracle/oracle.h"

#ifndef KILN_CUDA_EMU
#error "tests/oracle/emu_backend.cpp is the emulator build of the oracle (link kiln_cuda_emu)"
#endif

#include "engine/backends/cuda_native_kernels.inc"

namespace kiln::oracle {

void add_emu_backend() {
  // Below ref: `auto` never picks an emulated kernel; the oracle calls every candidate itself.
  BackendRegistrar r(registry(), "emu", DeviceType::cpu, priority::fallback - 1);
  add_cuda_native_kernels(r);
}

}  // namespace kiln::oracle
