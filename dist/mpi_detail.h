// What the MPI communicator's sources share (dist/mpi_comm.cpp, dist/mpi_liveness.cpp): the lock
// around MPI calls when the library runs at MPI_THREAD_SERIALIZED, the text of an MPI error code
// and the tags of kiln's own messages. Internal to dist/: it includes mpi.h.
//   ctest --test-dir build -L mpi
#pragma once

#if defined(KILN_HAVE_MPI)

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>

namespace kiln::dist::mpi_detail {

using Clock = std::chrono::steady_clock;

// Set by detail::set_mpi_serialized (dist/mpi_comm.h) before any communicator exists.
extern bool g_serialized;
std::mutex& call_mutex();

// Held around each MPI call when the library runs at MPI_THREAD_SERIALIZED.
struct MpiLock {
  std::unique_lock<std::mutex> lock;
  MpiLock() {
    if (g_serialized) lock = std::unique_lock<std::mutex>(call_mutex());
  }
};

std::string error_string(int rc);

// kiln's own messages, on the communicator's duplicates (never a user's tags there).
constexpr int kSignatureTag = 7001;  // control: the signature exchange
constexpr int kRingTag = 7002;       // control: kiln's ring allreduce
constexpr int kPingTag = 7003;       // probe: liveness pings
constexpr int kPongTag = 7004;       // probe: their answers

}  // namespace kiln::dist::mpi_detail

#endif
