// KILN_HOST_DEVICE marks scalar functions that CUDA kernels, the emulator and CPU kernels share.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
