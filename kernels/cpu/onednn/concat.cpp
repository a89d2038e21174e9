// oneDNN concat and sum on kiln's ConcatDesc / SumDesc. See concat.h.
//   Test: ctest --test-dir build -R test_concat_sum
#include "kernels/cpu/onednn/concat.h"

#include <vector>

#include "kernels/cpu/onednn/dnnl_compat.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct ConcatEntry : Made {
  std::vector<memory::desc> srcs;
  memory::desc dst;
  dnnl::concat::primitive_desc pd;
  dnnl::concat prim;
};

bool concat_ok(const ConcatDesc& d) {
  if (!(d.dtype == DType::float32 || d.dtype == DType::bfloat16) || d.outer <= 0 || d.inner <= 0 ||
      d.sizes.empty())
    return false;
  for (int64_t s : d.sizes)
    if (s <= 0) return false;
  return true;
}

std::shared_ptr<const ConcatEntry> concat_entry(const ConcatDesc& d) {
  return cached<ConcatEntry>(cache_key("concat", d.str()), [&] {
    ConcatEntry e;
    try {
      const dt t = d.dtype == DType::bfloat16 ? dt::bf16 : dt::f32;
      for (int64_t s : d.sizes) e.srcs.emplace_back(memory::dims{d.outer, s * d.inner}, t, tag::ab);
      e.dst = memory::desc({d.outer, d.total() * d.inner}, t, tag::ab);
      e.pd = compat::concat(e.dst, 1, e.srcs);
      e.prim = dnnl::concat(e.pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

struct SumEntry : Made {
  memory::desc md;
  dnnl::sum::primitive_desc pd;
  dnnl::sum prim;
};

bool sum_ok(const SumDesc& d) { return d.dtype == DType::float32 && d.n > 0 && d.inputs >= 1; }

std::shared_ptr<const SumEntry> sum_entry(const SumDesc& d) {
  return cached<SumEntry>(cache_key("sum", d.str()), [&] {
    SumEntry e;
    try {
      e.md = memory::desc({d.n}, dt::f32, tag::a);
      std::vector<float> scales(size_t(d.inputs), 1.f);
      std::vector<memory::desc> srcs(size_t(d.inputs), e.md);
      e.pd = compat::sum(e.md, scales, srcs);
      e.prim = dnnl::sum(e.pd);
      e.ok = true;
    } catch (const dnnl::error& err) {
      e.why = err.what();
    }
    return e;
  });
}

}  // namespace

bool supports_concat(const ConcatDesc& d) { return concat_ok(d) && concat_entry(d)->ok; }

void concat(const ConcatDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(concat_ok(d), "concat (onednn): unsupported ", d.str());
  const ConcatEntry& e = *concat_entry(d);
  KILN_CHECK(e.ok, "concat: oneDNN has no primitive for ", d.str(), ": ", e.why);
  KILN_DNNL("concat", d, [&] {
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, user_memory(e.dst, dst)}};
    for (size_t i = 0; i < e.srcs.size(); ++i) args.emplace(DNNL_ARG_MULTIPLE_SRC + int(i), user_memory(e.srcs[i], srcs[i]));
    execute(e.prim, args);
  }());
}

bool supports_sum(const SumDesc& d) { return sum_ok(d) && sum_entry(d)->ok; }

void sum(const SumDesc& d, const void* const* srcs, void* dst) {
  KILN_CHECK(sum_ok(d), "sum (onednn): unsupported ", d.str());
  const SumEntry& e = *sum_entry(d);
  KILN_CHECK(e.ok, "sum: oneDNN has no primitive for ", d.str(), ": ", e.why);
  KILN_DNNL("sum", d, [&] {
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, user_memory(e.md, dst)}};
    for (int64_t i = 0; i < d.inputs; ++i) args.emplace(DNNL_ARG_MULTIPLE_SRC + int(i), user_memory(e.md, srcs[i]));
    execute(e.prim, args);
  }());
}

}  // namespace kiln::onednn
