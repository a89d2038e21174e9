// placeholder, replaced below
#include "dist/nccl_comm.h"
#if defined(KILN_HAVE_NCCL) && defined(KILN_HAVE_MPI)
namespace kiln::dist {
std::unique_ptr<Communicator> make_nccl_communicator(CommOptions, Device) {
  KILN_THROW("nccl communicator: not implemented yet");
}
}  // namespace kiln::dist
#endif
