// kiln's own CUDA copy / fill / random / index_scatter (kernels/cuda/native/copy.cu) under the
// emulator: copy over every dtype pair and strided, permuted, broadcast and gapped loops against
// ref::copy (bit-exact: conversions are the same code); random bit-exact against the native CPU
// kernel for the same seed and offset (uniform, normal, bernoulli; 1..1000 elements); fill and
// index_scatter against ref.
//   ctest --test-dir build -R emu.test_copy
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/native/elementwise.h"
#include "kernels/cpu/ref/elementwise.h"
#include "kernels/cpu/ref/reduce.h"
#include "kernels/cuda/native/copy.h"

namespace kiln {
namespace {

const DType kAll[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16,
                      DType::int32,   DType::int64,   DType::uint8};

// Loops over [3, 5, 7] (105 elements): operand 0 (dst) and, if two operands, 1 (src).
struct LoopCase {
  const char* name;
  StridedLoop loop;
  int64_t dst_span, src_span;  // elements each buffer needs
};

std::vector<LoopCase> loop_cases(int noperands) {
  std::vector<LoopCase> cs;
  auto make = [&](const char* name, std::initializer_list<int64_t> sizes, std::initializer_list<int64_t> dst_st,
                  std::initializer_list<int64_t> src_st, int64_t dspan, int64_t sspan) {
    LoopCase c;
    c.name = name;
    c.loop.ndim = int(sizes.size());
    c.loop.noperands = noperands;
    int i = 0;
    for (int64_t s : sizes) c.loop.sizes[i++] = s;
    i = 0;
    for (int64_t s : dst_st) c.loop.strides[0][i++] = s;
    i = 0;
    for (int64_t s : src_st) c.loop.strides[1][i++] = s;
    c.dst_span = dspan;
    c.src_span = sspan;
    cs.push_back(c);
  };
  make("contiguous", {1000}, {1}, {1}, 1000, 1000);
  make("one element", {1}, {1}, {1}, 1, 1);
  make("empty dims", {}, {}, {}, 1, 1);
  make("permuted src", {3, 5, 7}, {35, 7, 1}, {1, 3, 15}, 105, 105);
  make("broadcast src", {3, 5, 7}, {35, 7, 1}, {0, 7, 1}, 105, 35);
  make("gapped dst", {3, 5, 7}, {80, 16, 2}, {35, 7, 1}, 240, 105);
  make("reversed 2-d, odd", {33, 7}, {1, 33}, {7, 1}, 231, 231);
  return cs;
}

// Values exact in every dtype's range: quarters in [0, 200) (uint8 takes no negatives).
template <class T>
std::vector<T> values(int64_t n, int seed) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = T(float(((i * 37 + seed * 11) % 800) * 0.25));
  return v;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("emu copy: every dtype pair, strided loops, bit-exact against ref") {
  for (const LoopCase& lc : loop_cases(2))
    for (DType s : kAll)
      for (DType o : kAll) {
        INFO(lc.name << ": " << dtype_name(s) << " -> " << dtype_name(o));
        CopyDesc d;
        d.src_dtype = s;
        d.dst_dtype = o;
        d.loop = lc.loop;
        CHECK(cuda::supports_copy(d));
        visit_dtype(s, [&](auto st) {
          visit_dtype(o, [&](auto ot) {
            using S = decltype(st);
            using O = decltype(ot);
            const auto src = values<S>(lc.src_span, 1);
            auto got = values<O>(lc.dst_span, 2), want = got;  // gaps keep their values
            cuda::copy(d, src.data(), got.data());
            ref::copy<S, O>(d, src.data(), want.data());
            CHECK(same_bytes(got, want));
          });
        });
      }
}

TEST_CASE("emu fill: dtypes and strided loops against ref") {
  for (const LoopCase& lc : loop_cases(1))
    for (DType t : kAll) {
      INFO(lc.name << ": " << dtype_name(t));
      FillDesc d;
      d.dtype = t;
      d.value = 3.5;
      d.loop = lc.loop;
      visit_dtype(t, [&](auto tt) {
        using T = decltype(tt);
        auto got = values<T>(lc.dst_span, 3), want = got;
        cuda::fill(d, got.data());
        ref::fill<T>(d, want.data());
        CHECK(same_bytes(got, want));
      });
    }
}

TEST_CASE("emu random: the same bits as the CPU native kernel for the same seed") {
  const RandomKind kinds[] = {RandomKind::uniform, RandomKind::normal, RandomKind::bernoulli};
  const DType dtypes[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32};
  for (RandomKind k : kinds)
    for (DType t : dtypes)
      for (const LoopCase& lc : loop_cases(1)) {
        INFO(int(k) << " " << dtype_name(t) << " " << lc.name);
        RandomDesc d;
        d.kind = k;
        d.dtype = t;
        d.a = k == RandomKind::bernoulli ? 0.3 : -0.5;
        d.b = 2.0;
        d.seed = 0x1234abcd5678ull;
        d.offset = 17;
        d.loop = lc.loop;
        visit_dtype(t, [&](auto tt) {
          using T = decltype(tt);
          auto got = values<T>(lc.dst_span, 4), want = got;
          cuda::random(d, got.data());
          native::random(d, want.data());
          CHECK(same_bytes(got, want));
        });
      }
}

TEST_CASE("emu index_scatter against ref") {
  for (DType t : {DType::float32, DType::float64, DType::int64, DType::float16}) {
    IndexScatterDesc d;
    d.dtype = t;
    d.outer = 3;
    d.reduce = 5;
    d.inner = 7;
    std::vector<int64_t> index(size_t(d.outer * d.inner));
    for (size_t i = 0; i < index.size(); ++i) index[i] = int64_t((i * 3 + 1) % size_t(d.reduce));
    visit_dtype(t, [&](auto tt) {
      using T = decltype(tt);
      const auto src = values<T>(d.outer * d.inner, 5);
      auto got = values<T>(d.outer * d.reduce * d.inner, 6);  // overwritten everywhere
      std::vector<T> want(got.size());
      cuda::index_scatter(d, src.data(), index.data(), got.data());
      ref::index_scatter<T>(d, src.data(), index.data(), want.data());
      CHECK(same_bytes(got, want));
    });
  }
}

}  // namespace kiln
