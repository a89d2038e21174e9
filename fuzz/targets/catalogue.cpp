// A user data-set catalogue ($KILN_CATALOGUE, JSON) as `kiln data list` reads it.
#include <cstdlib>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/data/catalogue.h"

KILN_FUZZ_TARGET(catalogue) {
  std::string path = kiln::fuzz::write_temp("catalogue.json", data, size);
  ::setenv("KILN_CATALOGUE", path.c_str(), 1);
  try {
    kiln::catalogue();
  } catch (const kiln::Error&) {
  }
  ::unsetenv("KILN_CATALOGUE");
  return 0;
}
