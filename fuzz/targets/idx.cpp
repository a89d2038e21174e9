// IDX (MNIST) files, plain or gzip, from memory as read_idx reads them after opening the file.
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/idx.h"

KILN_FUZZ_TARGET(idx) {
  try {
    kiln::parse_idx(data, size, "fuzz-idx3-ubyte");
  } catch (const kiln::Error&) {
  }
  return 0;
}
