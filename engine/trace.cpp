// Op tracing (engine/trace.h): the thread's recorder and nesting depth.
//   ctest --test-dir build -R onnx
#include "engine/trace.h"

#include "engine/graph_op.h"

namespace kiln::trace {
namespace detail {
thread_local Recorder* recorder = nullptr;
thread_local int depth = 0;
}  // namespace detail

void record(GraphOp op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::vector<Attr> attrs) {
  if (!detail::recorder) return;
  Event e;
  e.op = op;
  e.inputs = std::move(inputs);
  e.output = outputs.at(0);
  e.outputs = std::move(outputs);
  e.attrs = std::move(attrs);
  Nest nest;  // what the recorder itself does with tensors (reading values) is not recorded
  detail::recorder->record(std::move(e));
}

}  // namespace kiln::trace
