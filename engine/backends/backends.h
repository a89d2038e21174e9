// The backends kiln was built with, one registration unit each, in one ordered list
// (engine/backends/backends.cpp). The order is the tie-break of `auto` between candidates of
// equal priority; each unit gives its candidates a default priority (engine/dispatch.h).
// `kiln info`, the docs' per-backend op tables (docs/backends.md, checked by ctest -R backends_doc)
// and the install's component list all read this list.
//
// Adding a backend: its kernels in kernels/<device>/<name>/, its unit engine/backends/<name>.cpp
// defining register_<device>_<name>(BackendRegistrar&), a line in backends.cpp, and its build
// switch in cmake/ (docs/contributing.md).
#pragma once

#include <vector>

#include "engine/device.h"

namespace kiln {

class Registry;
class BackendRegistrar;

struct BackendUnit {
  const char* name;         // what users select: "native", "onednn", "cudnn", ...
  DeviceType device;
  int default_priority;     // engine/dispatch.h priority::
  const char* summary;      // one line for `kiln info` and the docs
  void (*register_kernels)(BackendRegistrar&);
};

// Every unit compiled into this build, in registration order.
const std::vector<BackendUnit>& backend_units();

// Runs every unit of backend_units() against `r` (kiln::init() does, once).
void register_backends(Registry& r);

}  // namespace kiln
