// The explicit, ordered list of kernel registrations (shared/DESIGN.md: no static-initialiser
// registration). Within each op family, the order of `add` calls is the `auto` preference.
#include "engine/dispatch.h"

namespace kiln {

void register_elementwise_kernels(Registry& r);
void register_reduce_kernels(Registry& r);
#define KILN_FAMILY(name) void register_##name##_kernels(Registry& r);
#include "engine/ops/families.inc"
#undef KILN_FAMILY

#ifdef KILN_HAVE_CUDA
void register_cuda_kernels(Registry& r);  // engine/register_cuda.cpp
#endif

void register_builtin_kernels(Registry& r) {
  register_elementwise_kernels(r);
  register_reduce_kernels(r);
#define KILN_FAMILY(name) register_##name##_kernels(r);
#include "engine/ops/families.inc"
#undef KILN_FAMILY
#ifdef KILN_HAVE_CUDA
  // kiln's own CUDA kernels after the families' cuDNN/cuBLAS candidates: on a GPU `auto` takes
  // the vendor library where it says yes.
  register_cuda_kernels(r);
#endif
}

}  // namespace kiln
