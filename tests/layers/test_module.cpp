// Module plumbing: parameter and buffer naming, train/eval, state_dict round trips, to(dtype),
// Sequential, backend settings.
//   ctest --test-dir build -R layers.test_module
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "layers/activation.h"
#include "layers/module.h"

using namespace kiln;

namespace {
// y = x * scale + shift, with a buffer counting calls.
class Affine : public Module {
 public:
  explicit Affine(int64_t n) {
    register_parameter("scale", ones({n}));
    register_parameter("shift", zeros({n}));
    register_buffer("calls", zeros({1}, DType::int64));
  }
  Tensor forward(const Tensor& x) override {
    seen_backend = backend_preference();
    return x * param("scale") + param("shift");
  }
  std::string repr() const override { return "Affine"; }
  std::string seen_backend;
};
}  // namespace

TEST_CASE("parameters, buffers and state dicts use dotted names") {
  auto net = make<Sequential>();
  net->add(make<Affine>(3)).add(make<ReLU>()).add("head", make<Affine>(3));
  auto names = net->named_parameters();
  REQUIRE(names.size() == 4);
  CHECK(names[0].first == "0.scale");
  CHECK(names[3].first == "head.shift");
  CHECK(net->named_buffers()[1].first == "head.calls");
  CHECK(net->num_parameters() == 12);
  CHECK(net->state_dict().size() == 6);
  for (auto& p : net->parameters()) CHECK(p.requires_grad());

  auto other = make<Sequential>();
  other->add(make<Affine>(3)).add(make<ReLU>()).add("head", make<Affine>(3));
  NamedTensors sd = net->state_dict();
  {
    NoGradGuard ng;
    sd[0].second.fill_(2.0);
  }
  other->load_state_dict(sd);
  CHECK(other->named_parameters()[0].second.to_vector() == std::vector<double>{2, 2, 2});

  NamedTensors bad = sd;
  bad.pop_back();
  CHECK_THROWS_KILN(other->load_state_dict(bad), "\n  1 missing key (in the module, not in the state dict):\n    head.calls");
  other->load_state_dict(bad, /*strict=*/false);
  bad = sd;
  bad[0].second = zeros({4});
  bad.emplace_back("extra.a", zeros({1}));
  bad.emplace_back("extra.b", zeros({1}));
  bad.erase(bad.begin() + 1);  // 0.shift
  // Every kind, one key per line, counted; a mis-shaped key loads nothing, strict or not.
  CHECK_THROWS_KILN(other->load_state_dict(bad),
                    "  1 missing key (in the module, not in the state dict):\n    0.shift\n"
                    "  2 unexpected keys (in the state dict, not in the module):\n    extra.a\n    extra.b\n"
                    "  1 key of another shape (nothing was loaded):\n    0.scale: [4] in the state dict, [3] in the module");
  CHECK_THROWS_KILN(other->load_state_dict(bad, false), "1 key of another shape");
  CHECK(other->named_parameters()[0].second.to_vector() == std::vector<double>{2, 2, 2});
}

TEST_CASE("train/eval propagate; to(dtype) converts parameters; gradients reach parameters") {
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Affine>(2), make<Affine>(2)});
  net->eval();
  CHECK(!(*net)[1]->is_training());
  net->train();
  CHECK((*net)[0]->is_training());
  net->to(DType::float64);
  CHECK(net->parameters()[0].dtype() == DType::float64);
  CHECK(net->parameters()[0].requires_grad());
  CHECK(net->named_buffers()[0].second.dtype() == DType::int64);
  Tensor x = from_vector(std::vector<double>{1, -2}, {1, 2}, DType::float64);
  ops::sum((*net)(x)).backward();
  CHECK(net->parameters()[0].grad().to_vector() == std::vector<double>{1, -2});
  net->zero_grad();
  CHECK(!net->parameters()[0].grad().defined());
}

TEST_CASE("a module's backend setting applies inside its forward") {
  auto a = make<Affine>(2);
  a->set_backend("ref");  // a module's setting orders backends; it is not strict
  (*a)(zeros({2}));
  CHECK(a->seen_backend == "ref");
  CHECK(backend_preference() != "ref");
  CHECK(a->summary().find("Affine  [4 params]") != std::string::npos);
}
