// ONNX models: the subset of onnx.proto (IR 7, opset 13) kiln writes and reads, as plain structs,
// encoded and decoded with io/formats/protobuf.h; the exporter (a zoo net or any Module -> ONNX graph, by
// tracing one eval-mode forward through engine/trace.h) and the importer (ONNX graph -> a kiln
// Module running kiln ops). Both directions speak NCHW (channels-last is a memory format only).
//   kiln export --onnx mnist.onnx --model mnist-cnn
//   kiln bench --model mnist.onnx --batch 8
//   ctest --test-dir build -R onnx
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/module.h"

namespace kiln::onnx {

constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;
// The default-domain opsets the importer reads: each mapped op's meaning at every one of them
// (onnx 1.23's schemas) is implemented or refused at import.
constexpr int64_t kOldestOpset = 7;
constexpr int64_t kNewestOpset = 28;

// TensorProto.DataType values kiln uses.
enum ElemType : int32_t { kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9, kDouble = 11 };

// "float32", "int64", ... for a TensorProto.DataType value (its number if unknown).
std::string elem_type_name(int32_t t);

// A TensorProto (initializer or attribute value); floats in f, integers in i. Read, int32 and bool
// tensors become int64 ones and float64 float32; written, kInt32 is int32 (values from i).
struct TensorData {
  std::string name;
  std::vector<int64_t> dims;
  int32_t elem_type = kFloat;
  std::vector<float> f;
  std::vector<int64_t> i;
  int64_t numel() const;
};

// AttributeProto.AttributeType values kiln uses.
enum AttrType : int32_t {
  kAttrFloat = 1,
  kAttrInt = 2,
  kAttrString = 3,
  kAttrTensor = 4,
  kAttrFloats = 6,
  kAttrInts = 7,
  kAttrStrings = 8
};

struct Attribute {
  std::string name;
  int32_t type = kAttrInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  TensorData t;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // "" = an absent optional input
  std::vector<Attribute> attrs;
  const Attribute* attr(const std::string& n) const;  // null when absent
};

// A graph input or output: element type and dims (-1 where the dim is symbolic, dim_param named).
struct ValueInfo {
  std::string name;
  int32_t elem_type = kFloat;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;  // "" where dims[k] is fixed
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<TensorData> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct Model {
  int64_t ir_version = kIrVersion;
  int64_t opset = kOpset;  // of the default domain
  std::string producer_name = "kiln", producer_version;
  Graph graph;
};

std::string encode(const Model& m);
// Throws kiln::Error naming `what` on malformed input.
Model decode(const std::string& bytes, const std::string& what = "onnx model");
void save(const Model& m, const std::string& path);
Model load(const std::string& path);

// --- export (io/onnx/onnx_export.cpp)
struct ExportOptions {
  // The batch dim (dim 0) of the input and output named "N" rather than fixed; left fixed when a
  // recurrent layer's lengths or initial state are constants of the traced batch.
  bool dynamic_batch = true;
  std::string graph_name = "kiln";
  // Rerun the exported graph with kiln's importer on a second input and compare with the net: an
  // op that escaped the trace (its result baked in as a constant) makes them differ, and the
  // export fails instead of writing a wrong model.
  bool verify = true;
};
// Runs one eval-mode forward of `net` on a deterministic input of `input_shape` ([N, C, H, W]),
// records every op, and returns the graph: parameters and buffers become initializers named by
// their state-dict keys, other tensors the net makes up (zeros of a shortcut) constants. The net's
// train/eval mode is restored after. A recurrent layer (ops::rnn: LSTM, GRU, RNN) is one ONNX node
// per layer (docs/onnx.md). Throws kiln::Error naming the op for an op or attribute ONNX (opset 13)
// cannot express here (an LSTM's proj_size, say).
Model export_module(Module& net, const Shape& input_shape, const ExportOptions& options = {});

// --- import (io/onnx/onnx_import.cpp)
// The graph's single input shape with `batch` in the symbolic (or first) dim.
Shape input_shape(const Model& m, int64_t batch);
// A Module that runs the graph with kiln ops: initializers become parameters (float ones; names
// with '.' kept as state-dict keys) or constants. Every node is checked at import against its op's
// schema at the model's opset (7 to kNewestOpset): an op, attribute, input or output kiln does not
// implement exactly throws kiln::Error naming the node, the op, the attribute and the opset; the
// graph then runs once at its declared input shape so shape-dependent refusals come at import too.
// Every tensor an imported graph makes (its input included) is bounded by max_tensor_bytes(),
// checked before anything is allocated for it: a hostile size (a Resize to 2^24 x 2^24, pads of
// millions, a declared input of terabytes) is a kiln::Error naming the node and the limit.
ModulePtr import_model(const Model& m);
// The limit on one tensor of an imported graph: KILN_ONNX_MAX_TENSOR_BYTES (a whole number of
// bytes), else 4 GiB (a ResNet-50 activation at batch 256 is 0.8 GiB).
uint64_t max_tensor_bytes();
// What the limit's errors call it.
constexpr const char* kTensorLimitName = "the limit on one tensor of an imported ONNX graph (KILN_ONNX_MAX_TENSOR_BYTES)";
// The op types import_model maps.
const std::vector<std::string>& supported_ops();

}  // namespace kiln::onnx
