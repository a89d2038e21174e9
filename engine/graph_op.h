// Graph ops: the user-visible ops of engine/graph_ops.inc, each declared once, and graph::call(),
// the one prologue they share. A graph op's function is
//   Tensor relu(const Tensor& x) {
//     return graph::call(GraphOp::relu, {x}, graph::no_attrs, [](const Tensor* in) { ... in[0] ... });
//   }
// and call() does what each op used to repeat:
//   - tracing (engine/trace.h): at the outermost traced level it records the op with its inputs,
//     output(s) and attributes (`attrs` is a callable, run only while tracing);
//   - half types: under Half::float32, float16/bfloat16 inputs run `body` on float32 copies and the
//     output is cast back; under Half::kernel `body` may return float32_fallback() when no kernel
//     takes its half descriptor, and runs again on float32 copies.
// Autograd stays in `body`: each op's backward closure keeps what its kernels need; routed
// through float32, the casts' own backward nodes carry the gradient back to the half inputs.
//   ctest --test-dir build -R 'graph_op|onnx'
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/trace.h"

namespace kiln {

enum class GraphOp : uint8_t {
#define KILN_GRAPH_OP(name, ...) name,
#include "engine/graph_ops.inc"
#undef KILN_GRAPH_OP
};

namespace graph {

enum class Half : uint8_t { as_is, float32, kernel, own };

struct OpInfo {
  const char* name;
  Half half;
  const char* attributes;  // space-separated
  const char* onnx;        // "" when the op has no ONNX form
  int opset;
  std::vector<const char*> kernels;
};

constexpr int kCount = 0
#define KILN_GRAPH_OP(name, ...) +1
#include "engine/graph_ops.inc"
#undef KILN_GRAPH_OP
    ;

const OpInfo& info(GraphOp op);
inline const char* name(GraphOp op) { return info(op).name; }
// The op of that name; throws kiln::Error naming the known ones when there is none.
GraphOp from_name(const std::string& name);

namespace detail {
// A graph op's tensor inputs (undefined tensors for absent optionals), viewed for one call.
class Inputs {
 public:
  Inputs(const Tensor* p, size_t n) : p_(p), n_(n) {}
  const Tensor* data() const { return p_; }
  size_t size() const { return n_; }
  std::vector<Tensor> vector() const { return std::vector<Tensor>(p_, p_ + n_); }

 private:
  const Tensor* p_;
  size_t n_;
};
}  // namespace detail

inline std::vector<trace::Attr> no_attrs() { return {}; }

// Returned by a Half::kernel op's body when no kernel takes its half-type descriptor.
inline Tensor float32_fallback() { return Tensor(); }

namespace detail {
// Half::float32 (or kernel, after a fallback) applies: input 0 is float16 or bfloat16. Every half
// input then runs as a float32 copy; an op whose inputs must share a dtype checks that before
// (conv2d and linear in their body, ahead of the fallback; conv_transpose2d and matmul ahead of call()).
bool routes_to_float32(Inputs in);
std::vector<Tensor> float32_copies(Inputs in);
[[noreturn]] void no_output(GraphOp op);

// What call() and call_multi() need of a body's result: one tensor or several.
inline bool has_output(const Tensor& y) { return y.defined(); }
inline bool has_output(const std::vector<Tensor>& y) { return !y.empty() && y[0].defined(); }
inline Tensor cast_back(const Tensor& y, DType t) { return y.to(t); }
inline std::vector<Tensor> cast_back(std::vector<Tensor> y, DType t) {
  for (Tensor& o : y)
    if (o.defined()) o = o.to(t);
  return y;
}
inline std::vector<Tensor> output_list(const Tensor& y) { return {y}; }
inline std::vector<Tensor> output_list(const std::vector<Tensor>& y) { return y; }

template <class Result, class Body>
Result run(GraphOp op, Inputs in, Body& body) {
  const Half h = info(op).half;
  const bool half = (h == Half::float32 || h == Half::kernel) && routes_to_float32(in);
  if (h != Half::float32 || !half) {
    Result y = body(in.data());
    if (has_output(y)) return y;
    if (h != Half::kernel || !half) no_output(op);
  }
  const std::vector<Tensor> f = float32_copies(in);
  const Result y = body(f.data());
  if (!has_output(y)) no_output(op);
  return cast_back(y, in.data()[0].dtype());
}

// Throws when the trace records an attribute engine/graph_ops.inc does not declare for `op`.
void check_attrs(GraphOp op, const std::vector<trace::Attr>& attrs);

template <class Result, class Attrs, class Body>
Result call(GraphOp op, Inputs in, Attrs& attrs, Body& body) {
  if (!trace::top_level()) return detail::run<Result>(op, in, body);
  Result y;
  {
    trace::Nest nest;
    y = detail::run<Result>(op, in, body);
  }
  std::vector<trace::Attr> a = attrs();
  detail::check_attrs(op, a);
  trace::record(op, in.vector(), output_list(y), std::move(a));
  return y;
}
}  // namespace detail

// Runs graph op `op` on `inputs`: body(const Tensor* in) computes it (in[i] is inputs[i], or its
// float32 copy); attrs() gives the attributes a trace records.
template <class Attrs, class Body>
Tensor call(GraphOp op, std::initializer_list<Tensor> inputs, Attrs&& attrs, Body&& body) {
  return detail::call<Tensor>(op, detail::Inputs(inputs.begin(), inputs.size()), attrs, body);
}
template <class Attrs, class Body>
Tensor call(GraphOp op, const std::vector<Tensor>& inputs, Attrs&& attrs, Body&& body) {
  return detail::call<Tensor>(op, detail::Inputs(inputs.data(), inputs.size()), attrs, body);
}

// A graph op of several outputs (the recurrent ops: output, h_n, c_n): body returns them all, in
// order, the first defined (others may be undefined: an op's absent output). Traced as one event
// with every output (trace::Event::outputs); under Half::float32 each defined output is cast back.
template <class Attrs, class Body>
std::vector<Tensor> call_multi(GraphOp op, const std::vector<Tensor>& inputs, Attrs&& attrs, Body&& body) {
  return detail::call<std::vector<Tensor>>(op, detail::Inputs(inputs.data(), inputs.size()), attrs, body);
}

}  // namespace graph
}  // namespace kiln
