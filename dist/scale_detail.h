// What the sources of the scaling model share (dist/scale.cpp, the model; dist/scale_tables.cpp,
// the published tables and the fit): reading an input file. Internal to dist/.
//   ctest --test-dir build -R dist.test_scale
#pragma once

#include <string>

namespace kiln::dist::scale_detail {

// A regular file only (a FIFO would block), bounded in size; the error names the path.
std::string read_text(const std::string& path);

}  // namespace kiln::dist::scale_detail
