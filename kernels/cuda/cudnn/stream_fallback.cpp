// Weak fallback for kiln::cuda::current_stream() (see stream.h): the legacy default stream.
// kernels/cuda/runtime.cpp's strong definition replaces it wherever that file is linked; without
// it no code can set a current stream, so the default stream is the right answer. Kept in its own
// file so the compiler never inlines the weak body into a caller.
#include "kernels/cuda/cudnn/stream.h"

namespace kiln::cuda {
__attribute__((weak)) Stream current_stream() { return nullptr; }
}  // namespace kiln::cuda
