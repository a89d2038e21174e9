// NumPy .npy arrays from memory (read_npy reads the file, then this).
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/formats/npy.h"

KILN_FUZZ_TARGET(npy) {
  try {
    kiln::parse_npy(data, size, "fuzz.npy");
  } catch (const kiln::Error&) {
  }
  return 0;
}
