// Internal to dist/: the NCCL communicator's factory (built with KILN_HAVE_NCCL and MPI).
//   ctest --test-dir build -L gpu
#pragma once

#include <memory>

#include "dist/comm.h"

namespace kiln::dist {

// All ranks call it: rank 0 makes the ncclUniqueId and broadcasts it over an MPI communicator;
// each rank uses `device` if it is a CUDA device, else the one its local rank picks.
std::unique_ptr<Communicator> make_nccl_communicator(CommOptions options, Device device);

}  // namespace kiln::dist
