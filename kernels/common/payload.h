// The opaque state a forward kernel hands to its backward (engine/op_decl.h): a backend's
// chosen primitive or algorithm, a workspace. Kernels that take one fill `state` in forward and
// read it in backward; `backend` is set by the dispatcher, so a backward kernel only ever sees
// the state of its own backend.
#pragma once

#include <memory>

namespace kiln {

struct KernelPayload {
  std::shared_ptr<const void> state;
  int backend = -1;  // engine's backend_id() of the kernel that filled `state`
};

}  // namespace kiln
