// ONNX models as `kiln bench --model file.onnx` loads them: protobuf decode, then the importer
// builds the graph's Module.
#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/onnx/onnx.h"

KILN_FUZZ_TARGET(onnx) {
  try {
    kiln::onnx::Model m = kiln::onnx::decode(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    kiln::onnx::import_model(m);
  } catch (const kiln::Error&) {
  }
  return 0;
}
