// Graph ops (engine/graph_op.h): the table of engine/graph_ops.inc and call()'s out-of-line parts.
//   ctest --test-dir build -R 'graph_op|onnx'
#include "engine/graph_op.h"

#include <cstring>

#include "engine/op_decl.h"

namespace kiln::graph {
namespace {

template <class... K>
std::vector<const char*> kernel_names() {
  return {K::name...};
}

// Every kernel op named in graph_ops.inc is a kernel_op type: a misspelt one fails to compile.
using namespace kernel_op;
const OpInfo kInfo[] = {
#define KILN_GRAPH_OP(name, half, attributes, onnx, opset, ...) \
  {#name, Half::half, attributes, onnx, opset, kernel_names<__VA_ARGS__>()},
#include "engine/graph_ops.inc"
#undef KILN_GRAPH_OP
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == size_t(kCount));

// The exporter writes opset 13: no entry may need a later definition.
#define KILN_GRAPH_OP(name, half, attributes, onnx, opset, ...) \
  static_assert(opset >= 1 && opset <= 13, #name ": the exporter writes ONNX opset 13");
#include "engine/graph_ops.inc"
#undef KILN_GRAPH_OP

bool declares(const char* list, const std::string& attr) {
  const size_t n = attr.size();
  for (const char* p = list; *p;) {
    while (*p == ' ') ++p;
    const char* e = p;
    while (*e && *e != ' ') ++e;
    if (size_t(e - p) == n && std::strncmp(p, attr.data(), n) == 0) return true;
    p = e;
  }
  return false;
}

}  // namespace

const OpInfo& info(GraphOp op) {
  const size_t i = size_t(op);
  KILN_CHECK(i < size_t(kCount), "graph op ", i, " is not in engine/graph_ops.inc");
  return kInfo[i];
}

GraphOp from_name(const std::string& name) {
  std::string known;
  for (int i = 0; i < kCount; ++i) {
    if (name == kInfo[i].name) return GraphOp(i);
    known += (i ? ", " : "") + std::string(kInfo[i].name);
  }
  KILN_THROW("no graph op '", name, "'; the graph ops are ", known);
}

namespace detail {

bool routes_to_float32(Inputs in) {
  return in.size() > 0 && in.data()[0].defined() && is_half(in.data()[0].dtype());
}

std::vector<Tensor> float32_copies(Inputs in) {
  std::vector<Tensor> f(in.data(), in.data() + in.size());
  for (Tensor& t : f)
    if (t.defined() && is_half(t.dtype())) t = t.to(DType::float32);
  return f;
}

void no_output(GraphOp op) {
  KILN_THROW("graph op ", name(op), " returned no tensor (only a Half::kernel op may ask for its float32 fallback, "
             "and only for half-type inputs)");
}

void check_attrs(GraphOp op, const std::vector<trace::Attr>& attrs) {
  for (const trace::Attr& a : attrs)
    KILN_CHECK(declares(info(op).attributes, a.name), "graph op ", name(op), " records attribute '", a.name,
               "', which engine/graph_ops.inc does not declare for it (", info(op).attributes, ")");
}

}  // namespace detail
}  // namespace kiln::graph
