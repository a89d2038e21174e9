// Problems of the elementwise family (engine/ops/elementwise.cpp, tensor.cpp, random.cpp,
// reduce.cpp): unary, binary, compare, copy, fill, random, reduce, index_scatter. Every UnaryOp,
// BinaryOp, CompareOp, RandomKind and ReduceOp; contiguous, transposed, broadcast (stride 0) and
// gapped output loops; one element; float32, float64 and the 16-bit types where a candidate takes
// them; int32, int64 and uint8 for the integer ops, and every dtype, boolean included, compared.
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

// Loops of `operands` operands (0: the output): dense, a single element, the input transposed,
// the last input broadcast along the inner dim, and an output with gaps between rows.
std::vector<StridedLoop> loops(int operands) {
  std::vector<StridedLoop> v = {dense_loop(operands, 37), dense_loop(operands, 1)};
  if (operands == 2) {
    v.push_back(make_loop({5, 7}, {{7, 1}, {1, 5}}));
    v.push_back(make_loop({5, 7}, {{7, 1}, {1, 0}}));
    v.push_back(make_loop({5, 7}, {{9, 1}, {7, 1}}));
  } else if (operands == 3) {
    v.push_back(make_loop({5, 7}, {{7, 1}, {1, 5}, {7, 1}}));
    v.push_back(make_loop({5, 7}, {{7, 1}, {7, 1}, {0, 1}}));
    v.push_back(make_loop({5, 7}, {{9, 1}, {7, 1}, {1, 0}}));
  } else {
    v.push_back(make_loop({5, 7}, {{9, 1}}));
  }
  return v;
}

// Every value of an enum whose last value is `last` (a value added after it must move `last`).
template <class E>
std::vector<E> all_of(E last) {
  std::vector<E> v;
  for (int i = 0; i <= int(last); ++i) v.push_back(E(i));
  return v;
}

Gen unary_input(UnaryOp op) {
  switch (op) {
    case UnaryOp::log: case UnaryOp::sqrt: case UnaryOp::rsqrt: case UnaryOp::reciprocal: case UnaryOp::pow_scalar:
      return positive();
    default: return uniform(-2, 2);
  }
}

double unary_alpha(UnaryOp op) {
  switch (op) {
    case UnaryOp::leaky_relu: return 0.1;
    case UnaryOp::pow_scalar: return 1.7;
    case UnaryOp::add_scalar: return 0.25;
    case UnaryOp::mul_scalar: return -1.5;
    case UnaryOp::clamp_min: return 0.1;
    case UnaryOp::clamp_max: return 0.3;
    default: return 0;
  }
}

const std::vector<DType>& integer_dtypes() {
  static const std::vector<DType> t = {DType::int32, DType::int64, DType::uint8};
  return t;
}

// Integer operands: small signed values (products stay small), uint8 the whole range (sums wrap).
Gen integer_input(DType t) { return t == DType::uint8 ? integers(0, 255) : integers(-50, 50); }

// Integral alphas of the integer unary ops.
double integer_alpha(UnaryOp op) {
  switch (op) {
    case UnaryOp::add_scalar: return 7;
    case UnaryOp::mul_scalar: return 3;
    case UnaryOp::clamp_min: return 2;
    case UnaryOp::clamp_max: return 9;
    default: return 0;
  }
}

Case<kernel_op::unary> unary_case() {
  Case<kernel_op::unary> c;
  for (UnaryOp o : all_of(UnaryOp::clamp_max)) {
    std::vector<DType> types = storage_dtypes();
    if (integer_unary_op(o)) types.insert(types.end(), integer_dtypes().begin(), integer_dtypes().end());
    for (DType t : types) {
      for (const StridedLoop& L : loops(2)) {
        if (t != DType::float32 && t != DType::int64 && !L.contiguous()) continue;  // layouts: one type each
        UnaryDesc d;
        d.op = o;
        d.dtype = t;
        d.alpha = is_integral(t) ? integer_alpha(o) : unary_alpha(o);
        d.loop = L;
        c.problems.push_back({d, 0, strides_note(L)});
      }
    }
  }
  c.args = [](const UnaryDesc& d, int) {
    return std::vector<Arg>{in("src", d.dtype, extent(d.loop, 1), is_integral(d.dtype) ? integer_input(d.dtype) : unary_input(d.op)),
                            out("dst", d.dtype, extent(d.loop, 0))};
  };
  // Kernel order: src, dst.
  return c;
}

bool is_compare(BinaryOp op) { return op >= BinaryOp::eq && op <= BinaryOp::le; }

Case<kernel_op::binary> binary_case() {
  Case<kernel_op::binary> c;
  for (BinaryOp o : all_of(BinaryOp::gelu_bwd)) {
    std::vector<DType> types = storage_dtypes();
    if (integer_binary_op(o)) types.insert(types.end(), integer_dtypes().begin(), integer_dtypes().end());
    for (DType t : types) {
      for (const StridedLoop& L : loops(3)) {
        if (t != DType::float32 && t != DType::int64 && !L.contiguous()) continue;
        BinaryDesc d;
        d.op = o;
        d.dtype = t;
        d.alpha = o == BinaryOp::leaky_relu_bwd ? 0.1 : 0;
        d.loop = L;
        c.problems.push_back({d, 0, strides_note(L)});
      }
    }
  }
  c.args = [](const BinaryDesc& d, int) {
    // Comparisons on small integers (equal operands happen); div by, and pow of, positives.
    Gen ga = is_compare(d.op) ? integers(-2, 2) : d.op == BinaryOp::pow ? positive() : uniform(-2, 2);
    Gen gb = is_compare(d.op) ? integers(-2, 2) : d.op == BinaryOp::div ? positive() : uniform(-2, 2);
    if (d.op == BinaryOp::sigmoid_bwd) gb = uniform(0, 1);  // b = sigmoid's output
    if (d.op == BinaryOp::tanh_bwd) gb = uniform(-1, 1);    // b = tanh's output
    if (is_integral(d.dtype)) ga = gb = integer_input(d.dtype);
    return std::vector<Arg>{in("a", d.dtype, extent(d.loop, 1), ga), in("b", d.dtype, extent(d.loop, 2), gb),
                            out("dst", d.dtype, extent(d.loop, 0))};
  };
  return c;
}

Case<kernel_op::compare> compare_case() {
  Case<kernel_op::compare> c;
  for (CompareOp o : all_of(CompareOp::logical_xor)) {
    for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::float16, DType::int32, DType::int64,
                    DType::uint8, DType::boolean}) {
      for (const StridedLoop& L : loops(3)) {
        if (t != DType::float32 && t != DType::int64 && !L.contiguous()) continue;
        CompareDesc d;
        d.op = o;
        d.dtype = t;
        d.loop = L;
        c.problems.push_back({d, 0, strides_note(L)});
      }
    }
  }
  c.args = [](const CompareDesc& d, int) {
    // Few distinct values, so that equal operands and zeros (false) are common.
    const Gen g = d.dtype == DType::boolean ? integers(0, 1) : d.dtype == DType::uint8 ? integers(0, 3) : integers(-2, 2);
    return std::vector<Arg>{in("a", d.dtype, extent(d.loop, 1), g), in("b", d.dtype, extent(d.loop, 2), g),
                            out("dst", DType::boolean, extent(d.loop, 0))};
  };
  return c;
}

Gen values_for(DType a, DType b) {
  if (a == DType::boolean || b == DType::boolean) return integers(0, 2);  // 2 becomes true
  if (a == DType::uint8 || b == DType::uint8) return integers(0, 200);
  if (!is_floating(a) || !is_floating(b)) return integers(-50, 50);
  return uniform(-3, 3);
}

Case<kernel_op::copy> copy_case() {
  Case<kernel_op::copy> c;
  // Every pair of the eight dtypes (the CUDA kernel instantiates each).
  const DType all[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16,
                       DType::int32,   DType::int64,   DType::uint8,   DType::boolean};
  std::vector<std::pair<DType, DType>> pairs;
  for (DType a : all)
    for (DType b : all) pairs.push_back({a, b});
  for (const auto& [s, t] : pairs)
    for (const StridedLoop& L : loops(2)) {
      CopyDesc d;
      d.src_dtype = s;
      d.dst_dtype = t;
      d.loop = L;
      c.problems.push_back({d, 0, strides_note(L)});
    }
  c.args = [](const CopyDesc& d, int) {
    return std::vector<Arg>{in("src", d.src_dtype, extent(d.loop, 1), values_for(d.src_dtype, d.dst_dtype)),
                            out("dst", d.dst_dtype, extent(d.loop, 0))};
  };
  return c;
}

Case<kernel_op::fill> fill_case() {
  Case<kernel_op::fill> c;
  for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::float16, DType::int32, DType::int64,
                  DType::uint8, DType::boolean})
    for (const StridedLoop& L : loops(1)) {
      FillDesc d;
      d.dtype = t;
      d.value = is_floating(t) ? -0.75 : 3;
      d.loop = L;
      c.problems.push_back({d, 0, strides_note(L)});
    }
  c.args = [](const FillDesc& d, int) { return std::vector<Arg>{out("dst", d.dtype, extent(d.loop, 0))}; };
  return c;
}

// Random fills are counter-based Philox (kernels/common/philox.h): every backend draws the same
// bits for (seed, offset, element), so the values are compared with ref's, not their statistics.
Case<kernel_op::random> random_case() {
  Case<kernel_op::random> c;
  for (RandomKind k : all_of(RandomKind::bernoulli))
    for (DType t : {DType::float32, DType::float64, DType::bfloat16})
      for (const StridedLoop& L : loops(1)) {
        RandomDesc d;
        d.kind = k;
        d.dtype = t;
        d.a = k == RandomKind::uniform ? -1 : k == RandomKind::normal ? 0.5 : 0.3;
        d.b = k == RandomKind::uniform ? 3 : 2;
        d.seed = 1234;
        d.offset = 7;
        d.loop = L;
        c.problems.push_back({d, 0, strides_note(L)});
      }
  c.args = [](const RandomDesc& d, int) { return std::vector<Arg>{out("dst", d.dtype, extent(d.loop, 0))}; };
  return c;
}

Case<kernel_op::reduce> reduce_case() {
  Case<kernel_op::reduce> c;
  // The last two: long rows and columns, the two-pass paths of kiln's CUDA reduction.
  const int64_t shapes[][3] = {{3, 5, 7}, {1, 33, 1}, {2, 1, 3}, {1, 40, 2}, {1, 4097, 1}, {2, 1000, 3}};
  for (ReduceOp o : all_of(ReduceOp::min))
    for (bool idx : {false, true}) {
      if (idx && (o == ReduceOp::sum || o == ReduceOp::mean)) continue;
      std::vector<DType> types = float_dtypes();
      if (o != ReduceOp::mean) types.push_back(DType::int64);  // integer and boolean sums, maxima, minima
      for (DType t : types)
        for (const auto& s : shapes) {
          ReduceDesc d;
          d.op = o;
          d.dtype = t;
          d.outer = s[0], d.reduce = s[1], d.inner = s[2];
          d.want_index = idx;
          c.problems.push_back({d});
        }
    }
  c.args = [](const ReduceDesc& d, int) {
    const int64_t m = d.outer * d.inner;
    std::vector<Arg> a = {in("src", d.dtype, d.outer * d.reduce * d.inner,
                             d.dtype == DType::int64 ? integers(-1000, 1000) : Gen()),
                          out("dst", d.dtype, m)};
    if (d.want_index) {
      a.push_back(out("index", DType::int64, m));
      a.back().fill = -7;
    } else {
      a.push_back(none("index"));
    }
    return a;
  };
  return c;
}

Case<kernel_op::index_scatter> index_scatter_case() {
  Case<kernel_op::index_scatter> c;
  const int64_t shapes[][3] = {{3, 5, 7}, {1, 9, 1}, {2, 1, 3}};
  for (DType t : storage_dtypes())
    for (const auto& s : shapes) {
      IndexScatterDesc d;
      d.dtype = t;
      d.outer = s[0], d.reduce = s[1], d.inner = s[2];
      c.problems.push_back({d});
    }
  c.args = [](const IndexScatterDesc& d, int) {
    const int64_t m = d.outer * d.inner;
    return std::vector<Arg>{in("src", d.dtype, m), in("index", DType::int64, m, integers(0, d.reduce - 1)),
                            out("dst", d.dtype, d.outer * d.reduce * d.inner)};
  };
  return c;
}

}  // namespace

void add_elementwise(CaseMap& m) {
  add(m, unary_case());
  add(m, binary_case());
  add(m, compare_case());
  add(m, copy_case());
  add(m, fill_case());
  add(m, random_case());
  add(m, reduce_case());
  add(m, index_scatter_case());
}

}  // namespace kiln::oracle
