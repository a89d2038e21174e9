// Op tracing: a Recorder installed on this thread (trace::Scope) sees every call of the graph ops
// (engine/graph_ops.inc: conv2d, linear, batch_norm, relu, pooling, add, cat, pad, upsample, lstm, ...)
// with its input tensors, output tensors and attributes, at the outermost level only (an op built from other
// traced ops is recorded once). io/onnx/onnx_export.cpp builds an ONNX graph from one forward this way, so any
// module, composite or not, exports without describing its own wiring. Off by default; when off
// a traced op costs one thread-local load.
//   ctest --test-dir build -R onnx
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"

namespace kiln {
enum class GraphOp : uint8_t;  // engine/graph_op.h
}

namespace kiln::trace {

// One attribute of a traced call: integers (sizes, strides, flags) or one real number.
struct Attr {
  std::string name;
  std::vector<int64_t> ints;
  double real = 0;
  bool is_real = false;
};
inline Attr ints(std::string name, std::vector<int64_t> v) { return Attr{std::move(name), std::move(v), 0, false}; }
inline Attr real(std::string name, double v) { return Attr{std::move(name), {}, v, true}; }

struct Event {
  GraphOp op{};                 // graph::name(op): the ops:: function ("conv2d", "max_pool2d", ...)
  std::vector<Tensor> inputs;   // in the function's argument order; undefined for an absent bias
  Tensor output;                // outputs[0]: the only one of most ops
  std::vector<Tensor> outputs;  // every output in order (a recurrent op's output, h_n, c_n; undefined
                                // where the op has none of that kind)
  std::vector<Attr> attrs;
};

class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual void record(Event e) = 0;
};

namespace detail {
extern thread_local Recorder* recorder;
extern thread_local int depth;
}  // namespace detail

// Installs `r` on this thread for the scope (the previous one comes back after).
class Scope {
 public:
  explicit Scope(Recorder* r) : prev_(detail::recorder), prev_depth_(detail::depth) {
    detail::recorder = r;
    detail::depth = 0;
  }
  ~Scope() {
    detail::recorder = prev_;
    detail::depth = prev_depth_;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Recorder* prev_;
  int prev_depth_;
};

// True when a recorder is installed on this thread (module-level rewrites such as folded batch
// norm stand aside then, so an export sees the modules' own ops and parameters).
inline bool active() { return detail::recorder != nullptr; }

// True when a recorder is installed and no traced op is running on this thread.
inline bool top_level() { return detail::recorder != nullptr && detail::depth == 0; }

// Marks a traced op running (ops it calls are not recorded).
class Nest {
 public:
  Nest() { ++detail::depth; }
  ~Nest() { --detail::depth; }
  Nest(const Nest&) = delete;
  Nest& operator=(const Nest&) = delete;
};

// Called by graph::call() and graph::call_multi() (engine/graph_op.h), the one place graph ops are
// traced. `outputs` is not empty.
void record(GraphOp op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::vector<Attr> attrs);

}  // namespace kiln::trace
