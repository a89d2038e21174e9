// PNG through the image-folder decoder and the validation resize (image.h).
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/targets/image.h"

KILN_FUZZ_TARGET(png) {
  if (size < 4 || data[0] != 0x89 || data[1] != 'P' || data[2] != 'N' || data[3] != 'G') return 0;  // the jpeg target's
  try {
    kiln::fuzz::decode_and_validate(data, size);
  } catch (const kiln::Error&) {
  }
  return 0;
}
