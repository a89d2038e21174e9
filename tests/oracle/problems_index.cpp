// Problems of the indexing family (engine/ops/index.cpp): gather (index_select rows and gather
// elements), scatter (copy and add, rows and elements, repeated indices), where (broadcast and
// strided loops), sort and topk (ties, both orders), cumsum (both directions). Every dtype the
// candidates take; the index arguments drawn in range (the op checks them before any kernel).
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

const DType kAll[] = {DType::float32, DType::float64, DType::bfloat16, DType::float16,
                      DType::int32,   DType::int64,   DType::uint8,    DType::boolean};

// Values of a dtype: small integers for the integer types (sums stay exact), 0/1 for booleans.
Gen values_of(DType t) {
  if (t == DType::boolean) return integers(0, 1);
  if (t == DType::uint8) return integers(0, 30);
  if (!is_floating(t)) return integers(-50, 50);
  return uniform(-2, 2);
}

// [outer, n (source or destination), m (index count), inner]
const int64_t kShapes[][4] = {{1, 5, 3, 1}, {2, 4, 7, 3}, {3, 1, 2, 5}, {1, 6, 6, 1}, {2, 9, 1, 4}};

Case<kernel_op::gather> gather_case() {
  Case<kernel_op::gather> c;
  for (DType t : kAll)
    for (bool per_row : {true, false})
      for (const auto& s : kShapes) {
        GatherDesc d;
        d.dtype = t;
        d.outer = s[0], d.src_n = s[1], d.idx_n = s[2], d.inner = s[3];
        d.per_row = per_row;
        c.problems.push_back({d});
      }
  c.args = [](const GatherDesc& d, int) {
    const int64_t nidx = d.per_row ? d.idx_n : d.outer * d.idx_n * d.inner;
    return std::vector<Arg>{in("src", d.dtype, d.outer * d.src_n * d.inner, values_of(d.dtype)),
                            in("index", DType::int64, nidx, integers(0, d.src_n - 1)),
                            out("dst", d.dtype, d.outer * d.idx_n * d.inner)};
  };
  return c;
}

Case<kernel_op::scatter> scatter_case() {
  Case<kernel_op::scatter> c;
  for (DType t : kAll)
    for (bool per_row : {true, false})
      for (bool acc : {false, true})
        for (const auto& s : kShapes) {
          ScatterDesc d;
          d.dtype = t;
          d.outer = s[0], d.dst_n = s[1], d.idx_n = s[2], d.inner = s[3];
          d.per_row = per_row;
          d.accumulate = acc;
          c.problems.push_back({d});
        }
  c.args = [](const ScatterDesc& d, int) {
    // Indices repeat (m > n in some shapes): copy keeps the last, add sums in order.
    const int64_t nidx = d.per_row ? d.idx_n : d.outer * d.idx_n * d.inner;
    return std::vector<Arg>{in("src", d.dtype, d.outer * d.idx_n * d.inner, values_of(d.dtype)),
                            in("index", DType::int64, nidx, integers(0, d.dst_n - 1)),
                            inout("dst", d.dtype, d.outer * d.dst_n * d.inner, values_of(d.dtype))};
  };
  return c;
}

Case<kernel_op::where> where_case() {
  Case<kernel_op::where> c;
  // dense; cond broadcast along the inner dim; a transposed; b a scalar; the output with gaps.
  const std::vector<StridedLoop> loops = {
      dense_loop(4, 37),
      make_loop({5, 7}, {{7, 1}, {1, 0}, {7, 1}, {7, 1}}),
      make_loop({5, 7}, {{7, 1}, {7, 1}, {1, 5}, {0, 0}}),
      make_loop({5, 7}, {{9, 1}, {7, 1}, {7, 1}, {0, 1}}),
  };
  for (DType t : kAll)
    for (const StridedLoop& L : loops) {
      if (t != DType::float32 && t != DType::int64 && !L.contiguous()) continue;
      WhereDesc d;
      d.dtype = t;
      d.loop = L;
      c.problems.push_back({d, 0, strides_note(L)});
    }
  c.args = [](const WhereDesc& d, int) {
    return std::vector<Arg>{in("cond", DType::boolean, extent(d.loop, 1), integers(0, 1)),
                            in("a", d.dtype, extent(d.loop, 2), values_of(d.dtype)),
                            in("b", d.dtype, extent(d.loop, 3), values_of(d.dtype)),
                            out("dst", d.dtype, extent(d.loop, 0))};
  };
  return c;
}

Case<kernel_op::sort> sort_case() {
  Case<kernel_op::sort> c;
  const int64_t shapes[][4] = {{1, 9, 1, 9}, {2, 7, 3, 7}, {3, 16, 2, 4}, {1, 33, 1, 1}, {2, 1, 5, 1}, {1, 12, 1, 0}};
  for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::float16, DType::int32, DType::int64,
                  DType::uint8})
    for (bool desc : {false, true})
      for (const auto& s : shapes) {
        SortDesc d;
        d.dtype = t;
        d.outer = s[0], d.n = s[1], d.inner = s[2], d.k = s[3];
        d.descending = desc;
        c.problems.push_back({d});
      }
  c.args = [](const SortDesc& d, int) {
    // Few distinct values: ties are common, and their order (by position) is checked.
    const Gen g = is_floating(d.dtype) ? integers(-4, 4) : values_of(d.dtype);
    return std::vector<Arg>{in("src", d.dtype, d.outer * d.n * d.inner, g),
                            out("values", d.dtype, d.outer * d.k * d.inner),
                            out("indices", DType::int64, d.outer * d.k * d.inner)};
  };
  return c;
}

Case<kernel_op::cumsum> cumsum_case() {
  Case<kernel_op::cumsum> c;
  const int64_t shapes[][3] = {{1, 40, 1}, {2, 5, 3}, {3, 1, 4}, {1, 9, 16}};
  for (DType t : {DType::float32, DType::float64, DType::int64})
    for (bool rev : {false, true})
      for (const auto& s : shapes) {
        ScanDesc d;
        d.dtype = t;
        d.outer = s[0], d.n = s[1], d.inner = s[2];
        d.reverse = rev;
        c.problems.push_back({d});
      }
  c.args = [](const ScanDesc& d, int) {
    const int64_t n = d.outer * d.n * d.inner;
    return std::vector<Arg>{in("src", d.dtype, n, is_floating(d.dtype) ? uniform(-1, 1) : integers(-1000, 1000)),
                            out("dst", d.dtype, n)};
  };
  return c;
}

}  // namespace

void add_index(CaseMap& m) {
  add(m, gather_case());
  add(m, scatter_case());
  add(m, where_case());
  add(m, sort_case());
  add(m, cumsum_case());
}

}  // namespace kiln::oracle
