// The registration units of engine/backends/backends.inc, in order. A unit whose build switch is
// off is compiled out here (KILN_IF_<switch>) and in its own file, nowhere else.
#include "engine/backends/backends.h"

#include <algorithm>

#include "engine/dispatch.h"

#define KILN_IF_ALWAYS(...) __VA_ARGS__
#ifdef KILN_HAVE_ONEDNN
#define KILN_IF_ONEDNN(...) __VA_ARGS__
#else
#define KILN_IF_ONEDNN(...)
#endif
#ifdef KILN_HAVE_CUDNN
#define KILN_IF_CUDNN(...) __VA_ARGS__
#else
#define KILN_IF_CUDNN(...)
#endif
#ifdef KILN_HAVE_CUDA
#define KILN_IF_CUDA(...) __VA_ARGS__
#else
#define KILN_IF_CUDA(...)
#endif

namespace kiln {

#define KILN_BACKEND_UNIT(name, device, prio, build, fn, summary) KILN_IF_##build(void fn(BackendRegistrar& r);)
#include "engine/backends/backends.inc"
#undef KILN_BACKEND_UNIT

const std::vector<BackendUnit>& backend_units() {
  static const std::vector<BackendUnit> units = {
#define KILN_BACKEND_UNIT(name, device, prio, build, fn, summary) \
  KILN_IF_##build({#name, DeviceType::device, priority::prio, summary, fn}, )
#include "engine/backends/backends.inc"
#undef KILN_BACKEND_UNIT
  };
  return units;
}

const std::vector<BackendUnit>& all_backend_units() {
  static const std::vector<BackendUnit> units = {
#define KILN_BACKEND_UNIT(name, device, prio, build, fn, summary) \
  {#name, DeviceType::device, priority::prio, summary, nullptr},
#include "engine/backends/backends.inc"
#undef KILN_BACKEND_UNIT
  };
  return units;
}

std::vector<std::string> backend_choices() {
  std::vector<std::string> names = {"auto"};
  for (const BackendUnit& u : backend_units())
    if (std::find(names.begin(), names.end(), u.name) == names.end()) names.push_back(u.name);
  return names;
}

std::string backends_markdown() {
  auto built = [](const BackendUnit& u) {
    for (const BackendUnit& b : backend_units())
      if (std::string(b.name) == u.name && b.device == u.device) return true;
    return false;
  };
  std::string out = "| op |", rule = "|---|";
  for (const BackendUnit& u : all_backend_units()) {
    out += std::string(" ") + u.name + "/" + device_type_name(u.device) + " |";
    rule += "---|";
  }
  out += "\n" + rule + "\n";
  static const char* const kOps[] = {
#define KILN_KERNEL_OP(id, ...) #id,
#include "engine/op_list.inc"
#undef KILN_KERNEL_OP
  };
  for (const char* name : kOps) {
    out += std::string("| ") + name + " |";
    const OpTableBase* t = registry().find_op(name);
    for (const BackendUnit& u : all_backend_units()) {
      std::string cell = built(u) ? "" : "(not built)";
      if (t && built(u))
        for (const OpTableBase::Info& c : t->candidate_info()) {
          if (backend_name(c.backend) != u.name || c.device != u.device) continue;
          cell = c.by_descriptor                     ? "by shape"
                 : c.priority >= priority::preferred ? "first"
                 : c.priority >= priority::normal    ? "yes"
                 : c.priority > priority::fallback   ? "second"
                                                     : "fallback";
        }
      out += " " + cell + " |";
    }
    out += "\n";
  }
  return out;
}

void register_backends(Registry& r) {
  for (const BackendUnit& u : backend_units()) {
    BackendRegistrar reg(r, u.name, u.device, u.default_priority);
    u.register_kernels(reg);
  }
}

}  // namespace kiln
