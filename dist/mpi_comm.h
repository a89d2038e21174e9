// Internal to dist/: the MPI communicator's factory and the MPI state comm.cpp keeps (thread
// level, kiln's 16-bit MPI_Ops). Nothing here includes mpi.h; without KILN_HAVE_MPI the factory
// throws "kiln was built without MPI".
//   ctest --test-dir build -L mpi
#pragma once

#include <memory>

#include "dist/comm.h"

namespace kiln::dist {

// A communicator over all ranks (MPI_COMM_WORLD, duplicated). Calls init() first if needed.
std::unique_ptr<Communicator> make_mpi_communicator(CommOptions options);

namespace detail {
// True when MPI runs at MPI_THREAD_SERIALIZED: every MPI call then takes mpi_mutex().
// Starts MPI whether or not a launcher is seen (singleton init); throws without MPI.
void init_mpi_now();
bool mpi_serialized();
void set_mpi_serialized(bool s);
// Frees the MPI_Ops mpi_comm.cpp created (before MPI_Finalize).
void release_mpi_ops();
}  // namespace detail

}  // namespace kiln::dist
