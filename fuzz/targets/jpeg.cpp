// JPEG through the image-folder decoder and the validation resize (image.h).
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/targets/image.h"

KILN_FUZZ_TARGET(jpeg) {
  if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return 0;  // the png target's
  try {
    kiln::fuzz::decode_and_validate(data, size);
  } catch (const kiln::Error&) {
  }
  return 0;
}
