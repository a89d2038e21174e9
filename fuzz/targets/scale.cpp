// `kiln scale`'s inputs from memory: the first byte picks the parser, 'p' a one-device profile
// (--profile FILE, JSON), anything else the published tables with their effect lines
// (--reference FILE, CSV).
#include <string>

#include "dist/scale.h"
#include "engine/error.h"
#include "fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(scale) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] == 'p')
      kiln::dist::profile_from_json(text, "fuzz.json");
    else
      kiln::dist::reference_from_csv(text, "fuzz.csv");
  } catch (const kiln::Error&) {
  }
  return 0;
}
