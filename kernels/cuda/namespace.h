// The namespace of kiln's own CUDA code. One kernel file is built twice: by nvcc for the GPU and
// as C++ against the emulator (KILN_CUDA_EMU, kernels/cuda/emu/). The two builds live in
// different inline namespaces so both can be linked into one test binary without clashing;
// callers write kiln::cuda::name and get the build their translation unit was compiled for.
// The emulated-device build (KILN_EMU_DEVICE) compiles them against the emulator as the library's
// device build, so they take the device build's namespace.
#pragma once

#if defined(KILN_CUDA_EMU) && !defined(KILN_EMU_DEVICE)
#define KILN_CUDA_NAMESPACE_BEGIN namespace kiln::cuda { inline namespace emu {
#else
#define KILN_CUDA_NAMESPACE_BEGIN namespace kiln::cuda { inline namespace dev {
#endif
#define KILN_CUDA_NAMESPACE_END } }
