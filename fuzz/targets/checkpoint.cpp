// Checkpoint sidecars (P.json) through load_checkpoint, as `kiln train --resume` reads them: the
// sidecar is the input; the two tensor files it names are fixed, valid safetensors files written
// once into the temp dir (a.safetensors, b.safetensors; the seeds name them with their sha256), so
// a well-formed sidecar reaches the digest check and the safetensors reader.
#include <string>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/formats/checkpoint.h"

namespace {

// {"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} padded to 56 bytes, then 1.0f, 2.0f.
// fuzz/tools/make_seeds.py builds the same bytes for the seed sidecars' sha256.
std::string tensor_file() {
  std::string h = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = char((h.size() >> (8 * i)) & 0xff);
  static const unsigned char data[8] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};
  return out + h + std::string(reinterpret_cast<const char*>(data), 8);
}

void write_tensor_files() {
  static const bool done = [] {
    std::string t = tensor_file();
    for (const char* name : {"a.safetensors", "b.safetensors"})
      kiln::fuzz::write_temp(name, reinterpret_cast<const uint8_t*>(t.data()), t.size());
    return true;
  }();
  (void)done;
}

}  // namespace

KILN_FUZZ_TARGET(checkpoint) {
  write_tensor_files();
  std::string path = kiln::fuzz::write_temp("ckpt.json", data, size);
  try {
    kiln::load_checkpoint(path);
  } catch (const kiln::Error&) {
  }
  return 0;
}
