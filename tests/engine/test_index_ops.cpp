// Indexing and selection ops (engine/ops/index.h): values as PyTorch gives them for the same
// calls, gradients against finite differences on ref and native, and the range errors. The
// kernels themselves are checked element by element against ref by tests/oracle.
//   ctest --test-dir build -R engine.test_index_ops
#include "tests/support/testing.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend_preference.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/index.h"
#include "engine/ops/reduce.h"

using namespace kiln;

namespace {

Tensor i64(const std::vector<double>& v, const Shape& s) { return from_vector(v, s, TensorOptions(DType::int64)); }
Tensor f64(const std::vector<double>& v, const Shape& s) { return from_vector(v, s, TensorOptions(DType::float64)); }

const char* const kBackends[] = {"native", "ref"};

}  // namespace

TEST_CASE("index_select and gather pick what PyTorch picks") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, true);
    Tensor x = arange(12, DType::float32).reshape({3, 4});
    // torch.index_select(x, 0, tensor([2, 0])) / (x, 1, tensor([3, 3, 1]))
    CHECK(ops::index_select(x, 0, i64({2, 0}, {2})).to_vector() == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3});
    CHECK(ops::index_select(x, 1, i64({3, 3, 1}, {3})).to_vector() ==
          std::vector<double>{3, 3, 1, 7, 7, 5, 11, 11, 9});
    CHECK(ops::index_select(x, -1, i64({0}, {1})).sizes() == Shape{3, 1});
    // torch.gather(x, 1, tensor([[0, 0], [1, 0], [3, 2]]))
    Tensor gi = i64({0, 0, 1, 0, 3, 2}, {3, 2});
    CHECK(ops::gather(x, 1, gi).to_vector() == std::vector<double>{0, 0, 5, 4, 11, 10});
    // Integer and boolean tensors move like any other.
    CHECK(ops::index_select(arange(5), 0, i64({4, 1}, {2})).to_vector() == std::vector<double>{4, 1});
    CHECK(ops::gather(ops::gt(x, 5.0), 1, gi).to_vector() == std::vector<double>{0, 0, 0, 0, 1, 1});
  }
}

TEST_CASE("scatter, scatter_add and index_put_") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, true);
    Tensor z = zeros({2, 4});
    Tensor idx = i64({1, 3, 0, 0}, {2, 2});
    Tensor src = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
    // torch.zeros(2, 4).scatter(1, idx, src): a repeated index keeps the last value.
    CHECK(ops::scatter(z, 1, idx, src).to_vector() == std::vector<double>{0, 1, 0, 2, 4, 0, 0, 0});
    CHECK(ops::scatter_add(z, 1, idx, src).to_vector() == std::vector<double>{0, 1, 0, 2, 7, 0, 0, 0});
    CHECK(z.to_vector() == std::vector<double>(8, 0.0));  // out of place
    // index_put_ with two index tensors, accumulate (torch: x.index_put_((i, j), v, accumulate=True)).
    Tensor x = zeros({3, 3});
    ops::index_put_(x, {i64({0, 2, 0}, {3}), i64({1, 2, 1}, {3})}, from_vector(std::vector<double>{5, 6, 7}, {3}), true);
    CHECK(x.to_vector() == std::vector<double>{0, 12, 0, 0, 0, 0, 0, 0, 6});
    // One index tensor over rows, values broadcast over the rest; negative indices count from the end.
    ops::index_put_(x, {i64({-1}, {1})}, full({}, 9.0));
    CHECK(x.to_vector() == std::vector<double>{0, 12, 0, 0, 0, 0, 9, 9, 9});
    // A boolean mask (x[x > 8] = 1).
    ops::index_put_(x, {ops::gt(x, 8.0)}, full({}, 1.0));
    CHECK(x.to_vector() == std::vector<double>{0, 1, 0, 0, 0, 0, 1, 1, 1});
    // A non-contiguous target.
    Tensor y = zeros({3, 2});
    Tensor yt = y.t();
    ops::index_put_(yt, {i64({1}, {1}), i64({2}, {1})}, full({}, 4.0));
    CHECK(y.to_vector() == std::vector<double>{0, 0, 0, 0, 0, 4});
  }
}

TEST_CASE("where, masked_fill, sort, topk, cumsum") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    BackendGuard g(backend, true);
    Tensor c = from_vector(std::vector<double>{1, 0, 1}, {3}).to(DType::boolean);
    CHECK(ops::where(c, arange(3, DType::float32), full({}, -1.0)).to_vector() == std::vector<double>{0, -1, 2});
    CHECK(ops::where(c, arange(3), full({}, 0.5)).dtype() == DType::float32);  // promoted
    Tensor x = from_vector(std::vector<double>{3, 1, 2, 1, 5, 4}, {2, 3});
    CHECK(ops::masked_fill(x, ops::gt(x, 2.0), 0).to_vector() == std::vector<double>{0, 1, 2, 1, 0, 0});
    // torch.sort(tensor([3, 1, 2, nan, 1]), stable=True): NaN last, ties by position.
    Tensor v = from_vector(std::vector<double>{3, 1, 2, std::nan(""), 1}, {5});
    ops::ValuesIndices s = ops::sort(v);
    CHECK(s.indices.to_vector() == std::vector<double>{1, 4, 2, 0, 3});
    CHECK(std::isnan(s.values.to_vector()[4]));
    CHECK(ops::sort(v, 0, true).indices.to_vector() == std::vector<double>{3, 0, 2, 1, 4});
    // torch.topk(x, 2, dim=1) and largest=False
    ops::ValuesIndices t = ops::topk(x, 2, 1);
    CHECK(t.values.to_vector() == std::vector<double>{3, 2, 5, 4});
    CHECK(t.indices.to_vector() == std::vector<double>{0, 2, 1, 2});
    CHECK(ops::topk(x, 1, 1, false).indices.to_vector() == std::vector<double>{1, 0});
    CHECK(ops::topk(x, 2, 0).values.to_vector() == std::vector<double>{3, 5, 4, 1, 1, 2});
    CHECK(ops::topk(arange(6).reshape({2, 3}), 1, 1).values.to_vector() == std::vector<double>{2, 5});
    // cumsum: floats stay, integers and booleans become int64.
    CHECK(ops::cumsum(x, 1).to_vector() == std::vector<double>{3, 4, 6, 1, 6, 10});
    CHECK(ops::cumsum(x, 0).to_vector() == std::vector<double>{3, 1, 2, 4, 6, 6});
    CHECK(ops::cumsum(c, 0).dtype() == DType::int64);
    CHECK(ops::cumsum(c, 0).to_vector() == std::vector<double>{1, 1, 2});
    CHECK(ops::argmax(x, 1, /*keepdim=*/true).to_vector() == std::vector<double>{0, 1});
  }
}

TEST_CASE("gradients of the indexing ops against finite differences") {
  const Tensor x = f64({0.3, -1.2, 0.7, 2.1, -0.4, 1.5, 0.9, -2.2, 0.05, 1.1, -0.6, 0.2}, {3, 4}).requires_grad_();
  const Tensor s = f64({0.5, -0.25, 1.5, 0.75}, {2, 2}).requires_grad_();
  const Tensor rows = i64({2, 0, 2}, {3});
  const Tensor gi = i64({0, 3, 1, 1, 2, 0}, {3, 2});
  const Tensor si = i64({1, 3, 0, 2}, {2, 2});
  const Tensor mask = ops::gt(f64({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0}, {3, 4}), 0.5);
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    test::GradcheckOptions o;
    o.backend = backend;
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::index_select(in[0], 0, rows); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::gather(in[0], 1, gi); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::scatter(in[0].slice(0, 0, 2), 1, si, in[1]); }, (std::vector<Tensor>{x, s}), o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::scatter_add(in[0].slice(0, 0, 2), 1, si, in[1]); },
               (std::vector<Tensor>{x, s}), o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::where(mask, in[0], ops::mul(in[0], 3.0)); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::masked_fill(in[0], mask, 2.5); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::sort(in[0], 1).values; }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::topk(in[0], 2, 0).values; }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::cumsum(in[0], 1); }, std::vector<Tensor>{x}, o);
    CHECK_GRAD([&](const std::vector<Tensor>& in) { return ops::cumsum(in[0], 0); }, std::vector<Tensor>{x}, o);
  }
}

TEST_CASE("indexing errors name the op, the dim and the bad index") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_KILN(ops::index_select(x, 0, i64({1, 3}, {2})),
                    "index_select: index 3 is out of range for dim 0 of size 3 (at position 1 of the index)");
  CHECK_THROWS_KILN(ops::index_select(x, 0, i64({-1}, {1})), "index -1 is out of range for dim 0 of size 3");
  CHECK_THROWS_KILN(ops::index_select(x, 0, zeros({1})), "index_select: indices must be int64 (or int32), got float32");
  CHECK_THROWS_KILN(ops::index_select(x, 2, i64({0}, {1})), "dim 2 out of range");
  CHECK_THROWS_KILN(ops::gather(x, 1, i64({0, 0}, {2})), "gather: index has 1 dims, the tensor 2");
  CHECK_THROWS_KILN(ops::gather(x, 1, i64({0, 0}, {1, 2})), "gather: index is [1, 2] but must match [3, 4] except along dim 1");
  CHECK_THROWS_KILN(ops::scatter(x, 0, i64({5}, {1, 1}).expand({1, 4}).contiguous(), zeros({1, 4})),
                    "scatter: index 5 is out of range for dim 0 of size 3");
  CHECK_THROWS_KILN(ops::scatter(x, 0, i64({0}, {1, 1}), zeros({1, 4})), "scatter: index [1, 1] and src [1, 4] must have one shape");
  CHECK_THROWS_KILN(ops::index_put_(x, {i64({3}, {1})}, full({}, 1.0)), "index_put_: index 3 is out of range for dim 0 of size 3");
  CHECK_THROWS_KILN(ops::index_put_(x, {i64({0}, {1}), i64({0}, {1}), i64({0}, {1})}, full({}, 1.0)),
                    "index_put_: 3 index tensors for a tensor of 2 dims");
  Tensor leaf = zeros({2}).requires_grad_();
  CHECK_THROWS_KILN(ops::index_put_(leaf, {i64({0}, {1})}, full({}, 1.0)), "index_put_: in-place write to a tensor that requires grad");
  CHECK_THROWS_KILN(ops::where(zeros({2}), zeros({2}), zeros({2})), "where: the condition must be a boolean tensor, got float32");
  CHECK_THROWS_KILN(ops::masked_fill(x, ops::gt(zeros({2}), 0.0), 1), "masked_fill: ");
  CHECK_THROWS_KILN(ops::topk(x, 5, 1), "topk: k = 5 but dim 1 has size 4");
  CHECK_THROWS_KILN(ops::topk(x, -1, 1), "topk: k must be at least 0, got -1");
  CHECK_THROWS_KILN(ops::sort(zeros({2}, DType::boolean)), "sort: dtype bool is not supported");
}
