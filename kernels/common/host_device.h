// KILN_HOST_DEVICE marks scalar functions that CUDA kernels, the emulator and CPU kernels share;
// KILN_DEVICE marks device-only helpers of kiln's own CUDA kernels (kernels/cuda/launch.h).
// Under nvcc they are CUDA's qualifiers; in the plain C++ builds (CPU, and the emulator, where
// KILN_CUDA_EMU compiles the .cu files as C++) the functions are ordinary host functions.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#define KILN_DEVICE __device__
#define KILN_FORCEINLINE __forceinline__
#else
#define KILN_HOST_DEVICE
#define KILN_DEVICE
#define KILN_FORCEINLINE inline __attribute__((always_inline))
#endif
