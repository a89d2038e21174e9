// The ordered list of backend registration units. One line per backend and device; a build
// without the backend's library compiles its line out here and nowhere else.
#include "engine/backends/backends.h"

#include "engine/dispatch.h"

namespace kiln {

void register_cpu_ref(BackendRegistrar& r);     // engine/backends/cpu_ref.cpp
void register_cpu_native(BackendRegistrar& r);  // engine/backends/cpu_native.cpp
#ifdef KILN_HAVE_ONEDNN
void register_cpu_onednn(BackendRegistrar& r);  // engine/backends/cpu_onednn.cpp
#endif
#ifdef KILN_HAVE_CUDNN
void register_cuda_cudnn(BackendRegistrar& r);  // engine/backends/cuda_cudnn.cpp
#endif
#ifdef KILN_HAVE_CUDA
void register_cuda_native(BackendRegistrar& r);  // engine/backends/cuda_native.cpp
#endif

const std::vector<BackendUnit>& backend_units() {
  static const std::vector<BackendUnit> units = {
#ifdef KILN_HAVE_ONEDNN
      {"onednn", DeviceType::cpu, priority::secondary, "oneDNN primitives, cached by shape (kernels/cpu/onednn)",
       register_cpu_onednn},
#endif
      {"native", DeviceType::cpu, priority::normal,
       "kiln's own OpenMP + SIMD kernels, ISA chosen at run time (kernels/cpu/native)", register_cpu_native},
      {"ref", DeviceType::cpu, priority::fallback,
       "naive reference kernels in float and double: the oracle (kernels/cpu/ref)", register_cpu_ref},
#ifdef KILN_HAVE_CUDNN
      {"cudnn", DeviceType::cuda, priority::preferred, "cuDNN and cuBLAS (kernels/cuda/cudnn)", register_cuda_cudnn},
#endif
#ifdef KILN_HAVE_CUDA
      {"native", DeviceType::cuda, priority::normal, "kiln's own CUDA kernels (kernels/cuda/native)",
       register_cuda_native},
#endif
  };
  return units;
}

void register_backends(Registry& r) {
  for (const BackendUnit& u : backend_units()) {
    BackendRegistrar reg(r, u.name, u.device, u.default_priority);
    u.register_kernels(reg);
  }
}

}  // namespace kiln
