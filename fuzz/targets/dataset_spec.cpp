// The --data argument's synthetic spec ("synthetic:CxHxW:CLASSES:N[:learnable]") through
// open_dataset_dir: dims whose element count wraps 2^64 must be refused, not allocated.
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/datasets.h"

KILN_FUZZ_TARGET(dataset_spec) {
  try {
    kiln::open_dataset_dir("synthetic:" + std::string(reinterpret_cast<const char*>(data), size));
  } catch (const kiln::Error&) {
  }
  return 0;
}
