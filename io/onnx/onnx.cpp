// ONNX messages (io/onnx/onnx.h) to and from the protobuf wire format. Field numbers are onnx.proto's
// (onnx/onnx.proto, IR version 7): only the fields kiln writes or reads; others are skipped on read.
//   ctest --test-dir build -R onnx
#include "io/onnx/onnx.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/checked_size.h"
#include "engine/error.h"
#include "io/formats/protobuf.h"

namespace kiln::onnx {
namespace {

// Field numbers (onnx.proto).
namespace model_f { enum { ir_version = 1, producer_name = 2, producer_version = 3, graph = 7, opset_import = 8 }; }
namespace opset_f { enum { domain = 1, version = 2 }; }
namespace graph_f { enum { node = 1, name = 2, initializer = 5, input = 11, output = 12 }; }
namespace node_f { enum { input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7 }; }
namespace attr_f { enum { name = 1, f = 2, i = 3, s = 4, t = 5, floats = 7, ints = 8, strings = 9, type = 20 }; }
namespace tensor_f {
enum {
  dims = 1,
  data_type = 2,
  float_data = 4,
  int32_data = 5,
  int64_data = 7,
  name = 8,
  raw_data = 9,
  double_data = 10
};
}
namespace vi_f { enum { name = 1, type = 2 }; }
namespace type_f { enum { tensor_type = 1 }; }
namespace ttype_f { enum { elem_type = 1, shape = 2 }; }
namespace shape_f { enum { dim = 1 }; }
namespace dim_f { enum { dim_value = 1, dim_param = 2 }; }

std::string encode_tensor(const TensorData& t) {
  pb::Writer w;
  w.packed_int64(tensor_f::dims, t.dims);
  w.int64(tensor_f::data_type, t.elem_type);
  w.string(tensor_f::name, t.name);
  // raw_data: little-endian values, what onnxruntime and PyTorch write for initializers.
  if (t.elem_type == kFloat) {
    w.bytes(tensor_f::raw_data, t.f.data(), t.f.size() * sizeof(float));
  } else if (t.elem_type == kInt32) {  // values in t.i (a recurrent node's sequence_lens)
    std::vector<int32_t> v;
    for (int64_t x : t.i) {
      KILN_CHECK(x >= INT32_MIN && x <= INT32_MAX, "onnx: tensor '", t.name, "' value ", x, " is not an int32");
      v.push_back(int32_t(x));
    }
    w.bytes(tensor_f::raw_data, v.data(), v.size() * sizeof(int32_t));
  } else {
    KILN_CHECK(t.elem_type == kInt64, "onnx: cannot write tensor '", t.name, "' of element type ", t.elem_type);
    w.bytes(tensor_f::raw_data, t.i.data(), t.i.size() * sizeof(int64_t));
  }
  return w.data();
}

std::string encode_attr(const Attribute& a) {
  pb::Writer w;
  w.string(attr_f::name, a.name);
  switch (a.type) {
    case kAttrFloat: w.float32(attr_f::f, a.f); break;
    case kAttrInt: w.int64(attr_f::i, a.i); break;
    case kAttrString: w.string(attr_f::s, a.s); break;
    case kAttrTensor: w.bytes(attr_f::t, encode_tensor(a.t)); break;
    case kAttrFloats: for (float v : a.floats) w.float32(attr_f::floats, v); break;
    case kAttrInts: for (int64_t v : a.ints) w.int64(attr_f::ints, v); break;
    case kAttrStrings: for (const std::string& v : a.strings) w.string(attr_f::strings, v); break;
    default: KILN_THROW("onnx: attribute '", a.name, "' has unsupported type ", a.type);
  }
  w.int64(attr_f::type, a.type);
  return w.data();
}

std::string encode_value_info(const ValueInfo& v) {
  pb::Writer shape;
  for (size_t k = 0; k < v.dims.size(); ++k) {
    pb::Writer d;
    if (k < v.dim_params.size() && !v.dim_params[k].empty()) d.string(dim_f::dim_param, v.dim_params[k]);
    else d.int64(dim_f::dim_value, v.dims[k]);
    shape.bytes(shape_f::dim, d.data());
  }
  pb::Writer tt;
  tt.int64(ttype_f::elem_type, v.elem_type);
  tt.bytes(ttype_f::shape, shape.data());
  pb::Writer type;
  type.bytes(type_f::tensor_type, tt.data());
  pb::Writer w;
  w.string(vi_f::name, v.name);
  w.bytes(vi_f::type, type.data());
  return w.data();
}

std::string encode_node(const Node& n) {
  pb::Writer w;
  for (const std::string& s : n.inputs) w.string(node_f::input, s);
  for (const std::string& s : n.outputs) w.string(node_f::output, s);
  w.string(node_f::name, n.name);
  w.string(node_f::op_type, n.op_type);
  for (const Attribute& a : n.attrs) w.bytes(node_f::attribute, encode_attr(a));
  if (!n.domain.empty()) w.string(node_f::domain, n.domain);
  return w.data();
}

template <class T>
void read_raw(const pb::Field& f, std::vector<T>& out) {
  KILN_CHECK(f.size % sizeof(T) == 0, "onnx: raw_data of ", f.size, " bytes is not a whole number of elements");
  const size_t n = f.size / sizeof(T);
  out.resize(n);
  if (f.size) std::memcpy(out.data(), f.data, f.size);  // little-endian hosts only (x86, aarch64, ppc64le)
}

// raw_data of a narrower integer type, widened to int64.
template <class T>
std::vector<int64_t> widen_raw(const pb::Field& f) {
  std::vector<T> v;
  read_raw(f, v);
  return std::vector<int64_t>(v.begin(), v.end());
}

TensorData decode_tensor(const pb::Field& field, const std::string& what) {
  TensorData t;
  pb::Reader r(field, what);
  pb::Field f;
  std::vector<int64_t> i32;
  std::vector<double> f64;
  const pb::Field* raw = nullptr;
  pb::Field raw_copy;
  while (r.next(f)) {
    switch (f.number) {
      case tensor_f::dims: pb::append_int64s(f, t.dims, what); break;
      case tensor_f::data_type: t.elem_type = int32_t(f.value); break;
      case tensor_f::name: t.name = f.str(); break;
      case tensor_f::float_data: pb::append_floats(f, t.f, what); break;
      case tensor_f::int32_data: pb::append_int64s(f, i32, what); break;
      case tensor_f::int64_data: pb::append_int64s(f, t.i, what); break;
      case tensor_f::raw_data: raw_copy = f; raw = &raw_copy; break;
      case tensor_f::double_data:
        if (f.type == pb::WireType::fixed64) {
          double d;
          std::memcpy(&d, &f.value, 8);
          f64.push_back(d);
        } else {
          for (size_t k = 0; k + 8 <= f.size; k += 8) {
            double d;
            std::memcpy(&d, f.data + k, 8);
            f64.push_back(d);
          }
        }
        break;
      default: break;
    }
  }
  const std::string where = what + " '" + t.name + "'";
  switch (t.elem_type) {
    case kFloat: if (raw) read_raw(*raw, t.f); break;
    case kDouble:
      if (raw) read_raw(*raw, f64);
      t.f.assign(f64.begin(), f64.end());
      t.elem_type = kFloat;
      break;
    case kInt64: if (raw) read_raw(*raw, t.i); break;
    case kBool:  // one byte each in raw_data, int32_data otherwise; read as int64 0 / 1
      t.i = raw ? widen_raw<uint8_t>(*raw) : i32;
      t.elem_type = kInt64;
      break;
    case kInt32:
      t.i = raw ? widen_raw<int32_t>(*raw) : i32;
      t.elem_type = kInt64;
      break;
    default:
      KILN_THROW("onnx: ", where, " has element type ", elem_type_name(t.elem_type),
                 "; kiln reads float32, float64, int32, int64 and bool");
  }
  const size_t have = t.elem_type == kFloat ? t.f.size() : t.i.size();
  const int64_t want = checked_numel(t.dims, "onnx: " + where + " dims");
  KILN_CHECK(int64_t(have) == want, "onnx: ", where, " has ", have, " values for dims of ", want,
             " elements (external data is not supported)");
  return t;
}

Attribute decode_attr(const pb::Field& field, const std::string& what) {
  Attribute a;
  pb::Reader r(field, what);
  pb::Field f;
  bool typed = false;
  while (r.next(f)) {
    switch (f.number) {
      case attr_f::name: a.name = f.str(); break;
      case attr_f::f: a.f = f.as_float(); break;
      case attr_f::i: a.i = int64_t(f.value); break;
      case attr_f::s: a.s = f.str(); break;
      case attr_f::t: a.t = decode_tensor(f, what + " attribute tensor"); break;
      case attr_f::floats: pb::append_floats(f, a.floats, what); break;
      case attr_f::ints: pb::append_int64s(f, a.ints, what); break;
      case attr_f::strings: a.strings.push_back(f.str()); break;
      case attr_f::type: a.type = int32_t(f.value); typed = true; break;
      default: break;
    }
  }
  KILN_CHECK(typed, "onnx: attribute '", a.name, "' of ", what, " has no type");
  return a;
}

ValueInfo decode_value_info(const pb::Field& field, const std::string& what) {
  ValueInfo v;
  pb::Reader r(field, what);
  pb::Field f;
  while (r.next(f)) {
    if (f.number == vi_f::name) v.name = f.str();
    if (f.number != vi_f::type) continue;
    pb::Reader tr(f, what);
    pb::Field tf;
    while (tr.next(tf)) {
      if (tf.number != type_f::tensor_type) continue;
      pb::Reader ttr(tf, what);
      pb::Field g;
      while (ttr.next(g)) {
        if (g.number == ttype_f::elem_type) v.elem_type = int32_t(g.value);
        if (g.number != ttype_f::shape) continue;
        pb::Reader sr(g, what);
        pb::Field d;
        while (sr.next(d)) {
          if (d.number != shape_f::dim) continue;
          pb::Reader dr(d, what);
          pb::Field e;
          int64_t value = -1;
          std::string param;
          while (dr.next(e)) {
            if (e.number == dim_f::dim_value) value = int64_t(e.value);
            if (e.number == dim_f::dim_param) param = e.str();
          }
          v.dims.push_back(value);
          v.dim_params.push_back(value < 0 && param.empty() ? "?" : param);
        }
      }
    }
  }
  return v;
}

Node decode_node(const pb::Field& field, const std::string& what) {
  Node n;
  pb::Reader r(field, what);
  pb::Field f;
  while (r.next(f)) {
    switch (f.number) {
      case node_f::input: n.inputs.push_back(f.str()); break;
      case node_f::output: n.outputs.push_back(f.str()); break;
      case node_f::name: n.name = f.str(); break;
      case node_f::op_type: n.op_type = f.str(); break;
      case node_f::attribute: n.attrs.push_back(decode_attr(f, what + " node")); break;
      case node_f::domain: n.domain = f.str(); break;
      default: break;
    }
  }
  return n;
}

}  // namespace

std::string elem_type_name(int32_t t) {
  static const char* names[] = {"undefined", "float32", "uint8",  "int8",    "uint16",    "int16",    "int32",
                                "int64",     "string",  "bool",   "float16", "float64",   "uint32",   "uint64",
                                "complex64", "complex128", "bfloat16"};
  if (t >= 0 && t < int32_t(sizeof names / sizeof names[0])) return names[t];
  return std::to_string(t);
}

int64_t TensorData::numel() const { return checked_numel(dims, "onnx: dims of tensor '" + name + "'"); }

const Attribute* Node::attr(const std::string& n) const {
  for (const Attribute& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

std::string encode(const Model& m) {
  pb::Writer g;
  for (const Node& n : m.graph.nodes) g.bytes(graph_f::node, encode_node(n));
  g.string(graph_f::name, m.graph.name);
  for (const TensorData& t : m.graph.initializers) g.bytes(graph_f::initializer, encode_tensor(t));
  for (const ValueInfo& v : m.graph.inputs) g.bytes(graph_f::input, encode_value_info(v));
  for (const ValueInfo& v : m.graph.outputs) g.bytes(graph_f::output, encode_value_info(v));
  pb::Writer opset;
  opset.string(opset_f::domain, "");
  opset.int64(opset_f::version, m.opset);
  pb::Writer w;
  w.int64(model_f::ir_version, m.ir_version);
  w.string(model_f::producer_name, m.producer_name);
  w.string(model_f::producer_version, m.producer_version);
  w.bytes(model_f::graph, g.data());
  w.bytes(model_f::opset_import, opset.data());
  return w.data();
}

Model decode(const std::string& bytes, const std::string& what) {
  Model m;
  m.opset = 0;
  pb::Reader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
  pb::Field f;
  bool has_graph = false;
  while (r.next(f)) {
    switch (f.number) {
      case model_f::ir_version: m.ir_version = int64_t(f.value); break;
      case model_f::producer_name: m.producer_name = f.str(); break;
      case model_f::producer_version: m.producer_version = f.str(); break;
      case model_f::opset_import: {
        pb::Reader o(f, what);
        pb::Field g;
        std::string domain;
        int64_t version = 0;
        while (o.next(g)) {
          if (g.number == opset_f::domain) domain = g.str();
          if (g.number == opset_f::version) version = int64_t(g.value);
        }
        if (domain.empty() || domain == "ai.onnx") m.opset = version;
        break;
      }
      case model_f::graph: {
        has_graph = true;
        pb::Reader gr(f, what + " graph");
        pb::Field g;
        while (gr.next(g)) {
          switch (g.number) {
            case graph_f::node: m.graph.nodes.push_back(decode_node(g, what)); break;
            case graph_f::name: m.graph.name = g.str(); break;
            case graph_f::initializer: m.graph.initializers.push_back(decode_tensor(g, what + " initializer")); break;
            case graph_f::input: m.graph.inputs.push_back(decode_value_info(g, what + " input")); break;
            case graph_f::output: m.graph.outputs.push_back(decode_value_info(g, what + " output")); break;
            default: break;
          }
        }
        break;
      }
      default: break;
    }
  }
  KILN_CHECK(has_graph, "onnx: ", what, " has no graph (is it an ONNX model file?)");
  return m;
}

void save(const Model& m, const std::string& path) {
  const std::string bytes = encode(m);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    KILN_CHECK(out, "onnx: cannot write ", tmp);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    KILN_CHECK(out.good(), "onnx: write to ", tmp, " failed");
  }
  KILN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "onnx: cannot rename ", tmp, " to ", path);
}

Model load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "onnx: cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return decode(ss.str(), path);
}

}  // namespace kiln::onnx
