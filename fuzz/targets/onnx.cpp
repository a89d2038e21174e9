// ONNX models as `kiln bench --model file.onnx` loads them: protobuf decode, then the importer
// builds the graph's Module.
#include <cstdlib>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "io/onnx/onnx.h"

KILN_FUZZ_TARGET(onnx) {
  // The importer's limit on one tensor at half the run's malloc limit (tools/fuzz: 64 MiB), so an
  // input whose sizes are over it finds the limit's error instead of the fuzzer's OOM report.
  static const bool limited = setenv("KILN_ONNX_MAX_TENSOR_BYTES", "33554432", 1) == 0;
  (void)limited;
  try {
    kiln::onnx::Model m = kiln::onnx::decode(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    kiln::onnx::import_model(m);
  } catch (const kiln::Error&) {
  }
  return 0;
}
