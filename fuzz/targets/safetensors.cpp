// safetensors files through load_safetensors (it reads the header, then each tensor's bytes).
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/formats/safetensors.h"

KILN_FUZZ_TARGET(safetensors) {
  std::string path = kiln::fuzz::write_temp("fuzz.safetensors", data, size);
  try {
    std::map<std::string, std::string> meta;
    kiln::load_safetensors(path, &meta);
  } catch (const kiln::Error&) {
  }
  return 0;
}
