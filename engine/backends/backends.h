// The backends kiln was built with, one registration unit each, in one ordered list
// (engine/backends/backends.inc). The order is the tie-break of `auto` between candidates of
// equal priority; each unit gives its candidates a default priority (engine/dispatch.h).
// `kiln info`, the docs' op table (docs/backends/ops.md, checked by ctest -R backends_doc)
// and the install's component list all read this list.
//
// Adding a backend: its kernels in kernels/<device>/<name>/, its unit engine/backends/<device>_<name>.cpp
// defining register_<device>_<name>(BackendRegistrar&), a line in backends.inc (and, for a new
// build switch, a KILN_IF_ in backends.cpp and its find logic in cmake/KilnDependencies.cmake);
// docs/contributing.md.
#pragma once

#include <string>
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
// Every unit kiln has, built here or not (register_kernels null): the docs' columns.
const std::vector<BackendUnit>& all_backend_units();
// What a backend preference may name in this build: "auto", then each unit's name once, in
// registration order ("auto", "onednn", "native", "ref", "cudnn"): the choices of `--backend`.
std::vector<std::string> backend_choices();

// The op x backend table of docs/backends/ops.md (`kiln info --backends-markdown`): one row per
// built-in op (engine/op_list.inc), one column per unit of all_backend_units(); a cell says
// whether the unit registers the op and how `auto` ranks it: "first" (priority::preferred,
// before native), "yes" (normal), "second" (after native), "fallback" (only where nothing else
// applies), "by shape" (a function of the descriptor). Units this build lacks: "(not built)".
std::string backends_markdown();

// Runs every unit of backend_units() against `r` (register_builtin_kernels() does, once, on
// the first dispatch: engine/dispatch.cpp).
void register_backends(Registry& r);

}  // namespace kiln
