// Pad and upsample descriptor strings.
//   tests: ctest --test-dir build -R shape
#include "kernels/common/shape.h"

#include <sstream>

namespace kiln {

const char* pad_mode_name(PadMode m) {
  switch (m) {
    case PadMode::constant: return "constant";
    case PadMode::reflect: return "reflect";
    case PadMode::replicate: return "replicate";
    case PadMode::circular: return "circular";
  }
  return "?";
}

std::string PadDesc::str() const {
  std::ostringstream os;
  os << "pad " << pad_mode_name(mode) << " " << dtype_name(dtype) << " [" << planes << ", " << ih << ", " << iw
     << "] -> [" << planes << ", " << oh << ", " << ow << "] top " << top << " left " << left;
  return os.str();
}

std::string UpsampleDesc::str() const {
  std::ostringstream os;
  os << (mode == UpsampleMode::nearest ? "upsample_nearest2d " : "upsample_bilinear2d ") << dtype_name(dtype) << " ["
     << n << ", " << c << ", " << ih << ", " << iw << "] -> [" << n << ", " << c << ", " << oh << ", " << ow << "]";
  if (align_corners) os << " align_corners";
  if (scale_h > 0 || scale_w > 0) os << " scale " << scale_h << "x" << scale_w;
  return os.str();
}

}  // namespace kiln
