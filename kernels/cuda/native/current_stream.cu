// current_stream() of the emulator build: every launch runs synchronously on its null stream.
// The GPU build's and the emulated device's is the CUDA runtime's (kernels/cuda/runtime.cpp), per
// device and thread.
// Test: ctest --test-dir build -L emu
#include "kernels/cuda/launch.h"

#if defined(KILN_CUDA_EMU) && !defined(KILN_EMU_DEVICE)
KILN_CUDA_NAMESPACE_BEGIN
Stream current_stream() { return nullptr; }
KILN_CUDA_NAMESPACE_END
#endif
