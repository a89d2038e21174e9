#include "engine/device.h"

#include <cstdlib>

#include "engine/error.h"

namespace kiln {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::cpu;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::cuda;
    index = 0;
    if (spec.size() > 4) {
      // At most 4 digits: no machine has 10,000 GPUs, and atoi of a longer run would overflow.
      KILN_CHECK(spec[4] == ':' && spec.size() > 5 && spec.size() <= 9 &&
                     spec.find_first_not_of("0123456789", 5) == std::string::npos,
                 "invalid device '", spec, "' (expected cpu, cuda or cuda:N with N < 10000)");
      index = std::atoi(spec.c_str() + 5);
    }
    return;
  }
  KILN_THROW("invalid device '", spec, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const { return type == DeviceType::cpu ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace kiln
