// A LibTorch-style program against an INSTALLED kiln (tests/consumer/run_consumer.sh), written as
// a LibTorch user writes one: a module of its own held by ModuleHolder and called like a function,
// init:: on its parameters, a custom autograd Function checked with gradcheck, a seeded split of
// a data set, a range-for over the loader, integer metrics from argmax and ==, indexing
// (topk, gather, masked_fill, index_put_), printing. It checks the values it computes and prints
// "libtorch_style: OK", or the first mismatch and exits 1.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace kiln;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL %s\n", what.c_str());
    ++failures;
  }
}

// Swish, y = x * sigmoid(x), with a backward of its own.
struct Swish : autograd::Function<Swish> {
  static const char* name() { return "Swish"; }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * ops::sigmoid(x);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const Tensor x = ctx->get_saved_variables()[0];
    const Tensor s = ops::sigmoid(x);
    return {grads[0] * (s + x * s * (1.0 - s))};
  }
};

// A small classifier with two inputs to its forward (features and a per-row scale).
class NetImpl : public Module {
 public:
  NetImpl(int64_t in, int64_t hidden, int64_t classes) {
    fc1 = register_module("fc1", ModuleHolder<Linear>(in, hidden));
    fc2 = register_module("fc2", ModuleHolder<Linear>(hidden, classes));
  }
  Tensor forward(const Tensor& x, const Tensor& scale) { return fc2(Swish::apply(fc1(x))) * scale; }
  using Module::forward;
  std::string repr() const override { return "Net"; }

  ModuleHolder<Linear> fc1, fc2;
};
using Net = ModuleHolder<NetImpl>;

}  // namespace

int main() {
  manual_seed(0);
  set_num_threads(2);
  expect(get_num_threads() == 2, "get_num_threads");

  // Data: two Gaussian blobs in 4-d, labels 0/1; 80/20 seeded split.
  const int64_t n = 200;
  Tensor labels = ops::gt(rand({n}), 0.5).to(DType::int64);
  Tensor centers = from_vector(std::vector<double>{-1, -1, -1, -1, 1, 1, 1, 1}, {2, 4});
  Tensor features = ops::index_select(centers, 0, labels) + randn({n, 4}) * 0.5;
  auto data = std::make_shared<TensorDataset>(features, labels);
  auto parts = random_split(data, {0.8, 0.2}, /*seed=*/7);
  expect(parts[0]->size() == 160 && parts[1]->size() == 40, "random_split sizes");

  Net net(4, 16, 2);
  net->apply([](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m)) init::xavier_uniform_(l->weight());
  });
  std::vector<std::string> names;
  for (auto& [name, m] : net->named_modules()) names.push_back(name);
  expect(names == std::vector<std::string>{"", "fc1", "fc2"}, "named_modules");

  optim::SGDOptions so;
  so.lr = 0.1;
  so.momentum = 0.9;
  auto opt = optim::sgd(net->named_parameters(), so);
  DataLoaderOptions lo;
  lo.batch_size = 32;
  lo.seed = 1;
  lo.workers = 0;
  DataLoader loader(parts[0], lo);
  CrossEntropyLoss criterion;
  for (int epoch = 0; epoch < 5; ++epoch)
    for (Batch& batch : loader) {
      Tensor logits = net(batch.input, ones({batch.size, 1}));
      Tensor loss = criterion(logits, batch.target);
      opt->zero_grad();
      loss.backward();
      opt->step();
    }

  // Accuracy on the held-out part: argmax == target, summed as int64.
  DataLoaderOptions eo = lo;
  eo.shuffle = false;
  DataLoader test(parts[1], eo);
  int64_t correct = 0, seen = 0;
  {
    NoGradGuard ng;
    for (Batch& batch : test) {
      Tensor pred = ops::argmax(net(batch.input, ones({batch.size, 1})), 1);
      Tensor hit = pred == batch.target;
      expect(hit.dtype() == DType::boolean, "== gives booleans");
      correct += int64_t(ops::sum(hit).item());
      seen += batch.size;
    }
  }
  expect(seen == 40, "the test split is seen once");
  expect(correct >= 36, "held-out accuracy " + std::to_string(correct) + "/40");

  // The custom Function against finite differences.
  const std::string err = autograd::gradcheck([](const std::vector<Tensor>& in) { return Swish::apply(in[0]); },
                                              {randn({6}, DType::float64).requires_grad_()});
  expect(err.empty(), "gradcheck: " + err);

  // Indexing.
  Tensor x = from_vector(std::vector<double>{3, -1, 2, 0, 5, -4}, {2, 3});
  ops::ValuesIndices top = ops::topk(x, 2, 1);
  expect(top.values.to_vector() == std::vector<double>{3, 2, 5, 0}, "topk values");
  expect(ops::gather(x, 1, top.indices).to_vector() == top.values.to_vector(), "gather");
  expect(ops::masked_fill(x, x < 0, 0).to_vector() == std::vector<double>{3, 0, 2, 0, 5, 0}, "masked_fill");
  Tensor hist = zeros({3}, DType::int64);
  ops::index_put_(hist, {top.indices.flatten()}, ones({4}, DType::int64), /*accumulate=*/true);
  expect(hist.to_vector() == std::vector<double>{2, 1, 1}, "index_put_ accumulate");  // indices 0, 2, 1, 0
  expect((arange(5) * 2 + 1).dtype() == DType::int64, "int64 stays int64 with integer scalars");
  expect(ops::cumsum(arange(4), 0).to_vector() == std::vector<double>{0, 1, 3, 6}, "cumsum");
  expect(to_string(arange(3)) == "tensor([0, 1, 2])", "printing");

  if (failures) return 1;
  std::printf("libtorch_style: OK (held-out accuracy %lld/40)\n", static_cast<long long>(correct));
  return 0;
}
