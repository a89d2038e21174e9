// Internal to dist/: the NCCL communicator's factory (built with KILN_HAVE_NCCL).
//   ctest --test-dir build -R gpu.test_gpu_nccl
#pragma once

#include <memory>

#include "dist/comm.h"

namespace kiln::dist {

// All ranks call it. Under a launcher (several ranks): rank 0 makes the ncclUniqueId and
// broadcasts it over an MPI communicator, and each rank uses the GPU its local rank picks. Alone
// (no launcher): a communicator of one rank on `device` (cuda:N), else on the current GPU.
std::unique_ptr<Communicator> make_nccl_communicator(CommOptions options, Device device);

}  // namespace kiln::dist
