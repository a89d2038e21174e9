// Inside the ONNX importer (io/onnx/onnx_import.cpp, onnx_ops.cpp, onnx_spatial.cpp,
// onnx_resize.cpp, onnx_rnn.cpp): what a node knows at import time, and the op builders. A builder reads the
// node's attributes and constant inputs once, refuses at import what kiln does not implement
// exactly, and returns the function that runs the node. Every attribute read is marked; one no
// builder read is refused when the node is done (NodeCtx::finish), so an attribute kiln does not
// know can never be ignored silently. Meanings that changed between opsets are chosen by
// `version`, the op's schema version in force at the model's opset (onnx.defs: the newest
// since_version <= the opset).
//   ctest --test-dir build -R "onnx"
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "io/onnx/onnx.h"

namespace kiln::onnx::detail {

// Runs a node: its inputs in order (an undefined Tensor for an absent one or one read at import).
using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;
// Runs a node of several outputs (the recurrent ops): every output in order.
using MultiOpFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The graph's constant values: int64 (and int32, bool) tensors and float ones, by value name.
struct Constants {
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, const std::vector<float>*> floats;  // into the graph or the Constant nodes
};

class NodeCtx {
 public:
  NodeCtx(const Node& n, size_t index, int64_t opset, int64_t version, const Constants& c);

  const Node& node;
  const int64_t opset, version;
  // "onnx import: node 'name' (Op, opset N): ", for errors at import and at run time.
  const std::string& where() const { return where_; }
  template <class... A>
  [[noreturn]] void refuse(const A&... a) const {
    throw Error(::kiln::detail::concat(where_, a...), __FILE__, __LINE__);
  }

  bool has(const char* name) const { return node.attr(name) != nullptr; }
  int64_t i(const char* name, int64_t dflt);
  double f(const char* name, double dflt);
  std::string s(const char* name, const std::string& dflt);
  std::vector<int64_t> ints(const char* name, const std::vector<int64_t>& dflt);
  std::vector<float> floats(const char* name, const std::vector<float>& dflt);
  std::vector<std::string> strings(const char* name, const std::vector<std::string>& dflt);
  // Marks an attribute read whose value does not change kiln's result (documented at the call).
  void ignore(const char* name) { used_.insert(name); }

  // Input k is given (present and not "").
  bool has_input(size_t k) const { return k < node.inputs.size() && !node.inputs[k].empty(); }
  // Input k as a constant known at import (an initializer or a Constant node); refused otherwise.
  std::vector<int64_t> const_ints(size_t k, const char* what) const;
  std::vector<float> const_floats(size_t k, const char* what) const;
  bool is_const(size_t k) const;
  // Refuses the attributes no reader took.
  void finish() const;

 private:
  const Attribute* get(const char* name, int32_t type);
  const Constants& consts_;
  std::string where_;
  std::set<std::string> used_;
};

// The builders. build_op (io/onnx/onnx_ops.cpp) dispatches on the op type to its own builders
// and to these (io/onnx/onnx_spatial.cpp, io/onnx/onnx_resize.cpp); the importer calls
// recurrent_op (io/onnx/onnx_rnn.cpp) for the ops of several outputs.
OpFn build_op(NodeCtx& c);
// relu: the ReLU as the convolution's post-op (ops::conv2d_relu; the batch-norm fold of
// onnx_import.cpp runs Conv -> BatchNormalization -> Relu as one such convolution).
OpFn conv_op(NodeCtx& c, bool relu = false);
OpFn conv_transpose_op(NodeCtx& c);
OpFn pool_op(NodeCtx& c);
OpFn global_pool_op(NodeCtx& c);
OpFn pad_op(NodeCtx& c);
OpFn slice_op(NodeCtx& c);
OpFn resize_op(NodeCtx& c);  // Resize and Upsample
// LSTM, GRU, RNN (io/onnx/onnx_rnn.cpp): the only ops of several outputs (Y, Y_h, Y_c), each
// optional; inputs 4 (sequence_lens) and 7 (P) are read at import.
bool is_recurrent(const std::string& op_type);
MultiOpFn recurrent_op(NodeCtx& c);

// Pieces shared by the builders.
// x's elements at positions idx along `axis`, in that order (exact: slices and concatenation).
Tensor take(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx);
int64_t norm_axis(const NodeCtx& c, int64_t axis, int64_t rank, const char* what);

}  // namespace kiln::onnx::detail
