// current_stream() for builds without the CUDA runtime's own definition. The emulator runs every
// launch synchronously on its null stream. The GPU build's definition is weak: the CUDA runtime
// (kernels/cuda/runtime.cpp) defines the real one, per device and thread, which replaces it at
// link time; until then kernels launch on the legacy default stream (also null), which is correct
// CUDA, only not concurrent. Test: ctest --test-dir build -L emu
#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN

#if defined(KILN_CUDA_EMU)
Stream current_stream() { return nullptr; }
#else
__attribute__((weak)) Stream current_stream() { return nullptr; }
#endif

KILN_CUDA_NAMESPACE_END
