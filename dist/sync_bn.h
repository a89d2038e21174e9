// Synchronised batch norm for data-parallel training (`kiln train --sync-bn`): every BatchNorm of
// a model computes its training statistics over all ranks' batches instead of its own
// (PyTorch's convert_sync_batchnorm), so N ranks of batch b normalise as one process of batch N·b.
// The sums go through the communication thread in the order the ranks' identical forward and
// backward passes reach them.
//   ctest --test-dir build -L mpi -R sync
#pragma once

#include "dist/comm.h"
#include "dist/comm_thread.h"
#include "layers/module.h"

namespace kiln::dist {

// Installs the cross-rank sum in every BatchNorm1d/2d under `model`; returns how many.
int enable_sync_batch_norm(Module& model, Communicator& comm, CommThread& thread);
// Restores per-rank statistics.
void disable_sync_batch_norm(Module& model);

}  // namespace kiln::dist
