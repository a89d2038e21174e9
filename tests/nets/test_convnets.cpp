// The classic convnets of the zoo (nets/convnets.h): published parameter counts, output shapes
// (layer by layer for AlexNet and OverFeat against nets.md §1.2/§1.3), torchvision state-dict
// names, the classes / in_channels / image_size options, one SGD step that lowers the loss, the
// option combinations that must throw, and torchvision's initialisation through init::.
//   ctest --test-dir build -R nets.test_convnets
// Cost: building the ImageNet nets (60-146 M parameters each, twice) dominates; their training
// step runs at a reduced image size where the net adapts (alexnet 63, vgg 32, resnet 32-64).
// OverFeat has no adaptive pool, so its step runs at 231 (batch 1).
#include "tests/support/testing.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "engine/ops/reduce.h"
#include "layers/module.h"
#include "nets/convnets.h"

using namespace kiln;
using nets::NetOptions;

namespace {

// The parameter called `name`.
Tensor param_of(const Module& m, const std::string& name) {
  for (const auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  FAIL("no parameter ", name);
  return {};
}

// The spread of one tensor's values about 0.
double rms(const Tensor& t) {
  double sq = 0;
  for (double v : t.to_vector()) sq += v * v;
  return std::sqrt(sq / double(t.numel()));
}


bool has_key(const Module& m, const std::string& key) {
  for (const auto& [k, t] : m.state_dict())
    if (k == key) return true;
  return false;
}

// Forward at the net's default input, batch 1, eval mode without a graph: [1, classes], finite.
void check_forward(Module& net, const nets::NetInfo& info) {
  NoGradGuard ng;
  net.eval();
  Shape shape = info.input;
  shape.insert(shape.begin(), 1);
  Generator g(3);
  Tensor y = net(randn(shape, {}, &g));
  CHECK(y.sizes() == Shape{1, info.classes});
  CHECK(std::isfinite(ops::sum(y).item()));
}

// One SGD step on a fixed batch of `batch` random images of side `size` lowers the cross-entropy.
// BN nets train in train mode (batch statistics); the others in eval mode so that dropout's
// masks do not make the two losses incomparable.
void check_training_step(Module& net, int64_t in_channels, int64_t size, int64_t batch, int64_t classes,
                         bool batch_norm, double lr) {
  net.train(batch_norm);
  Generator g(9);
  Tensor x = randn({batch, in_channels, size, size}, {}, &g);
  std::vector<double> labels;
  for (int64_t i = 0; i < batch; ++i) labels.push_back(double((i * 3 + 1) % classes));
  Tensor target = from_vector(labels, {batch}, DType::int64);
  Tensor loss = ops::cross_entropy(net(x), target);
  const double before = loss.item();
  net.zero_grad();
  loss.backward();
  {
    NoGradGuard ng;
    for (Tensor& p : net.parameters()) p.copy_(p - p.grad() * lr);
  }
  net.zero_grad();
  double after;
  {
    NoGradGuard ng;
    after = ops::cross_entropy(net(x), target).item();
  }
  INFO("loss before ", before, ", after ", after);
  CHECK(std::isfinite(before));
  CHECK(after < before);
}

struct Spec {
  const char* name;
  int64_t parameters;  // published (nets.md §3), written out here rather than read from the zoo
  int64_t fc_in;       // inputs of the last Linear: classes=7 changes the count by (classes-7)*(fc_in+1)
  int64_t train_size;  // image side for the training step
  int64_t train_batch;
  bool batch_norm;
  const char* key;     // a torchvision state-dict key the net must have
};

// Default build: count, key, forward. Then classes=7 at the training size: count and one step.
void check_net(const Spec& s) {
  manual_seed(0);
  const nets::NetInfo& info = nets::find(s.name);
  CHECK(info.parameters == s.parameters);
  {
    ModulePtr net = info.build({});
    CHECK(net->num_parameters() == s.parameters);
    CHECK_MESSAGE(has_key(*net, s.key), std::string(s.key));
    check_forward(*net, info);
  }
  NetOptions o;
  o.classes = 7;
  if (s.train_size != info.input[1]) o.image_size = s.train_size;
  ModulePtr net = info.build(o);
  CHECK(net->num_parameters() == s.parameters - (info.classes - 7) * (s.fc_in + 1));
  check_training_step(*net, 3, s.train_size, s.train_batch, 7, s.batch_norm, 0.01);
}

// Runs the children of `features` one at a time and returns the side (H == W) after each layer
// whose repr starts with one of the given prefixes.
std::vector<int64_t> feature_sides(Module& net, int64_t size) {
  NoGradGuard ng;
  net.eval();
  Module* features = nullptr;
  for (const auto& [n, c] : net.children())
    if (n == "features") features = c.get();
  REQUIRE(features != nullptr);
  Generator g(4);
  Tensor x = randn({1, 3, size, size}, {}, &g);
  std::vector<int64_t> sides;
  for (const auto& [n, c] : features->children()) {
    x = (*c)(x);
    const std::string r = c->repr();
    if (r.rfind("Conv2d", 0) == 0 || r.rfind("MaxPool2d", 0) == 0) {
      CHECK(x.size(2) == x.size(3));
      sides.push_back(x.size(2));
    }
  }
  return sides;
}

}  // namespace

TEST_CASE("alexnet: nets.md §1.2 shapes layer by layer, count, classes, training step at 63x63") {
  manual_seed(0);
  ModulePtr net = nets::build("alexnet");
  // conv1 55, pool 27, conv2 27, pool 13, conv3..5 13, pool 6.
  CHECK(feature_sides(*net, 224) == std::vector<int64_t>{55, 27, 27, 13, 13, 13, 13, 6});
  net.reset();
  // 63 is the smallest side alexnet takes (feature maps 15, 7, 3, 1 after the pools).
  check_net({"alexnet", 61100840, 4096, 63, 2, false, "classifier.6.weight"});
}

TEST_CASE("overfeat: nets.md §1.3 shapes layer by layer, count, classes, training step") {
  manual_seed(0);
  ModulePtr net = nets::build("overfeat");
  // conv1 56, pool 28, conv2 24, pool 12, conv3..5 12, pool 6.
  CHECK(feature_sides(*net, 231) == std::vector<int64_t>{56, 28, 24, 12, 12, 12, 12, 6});
  net.reset();
  check_net({"overfeat", 145920872, 4096, 231, 1, false, "features.10.weight"});
}

TEST_CASE("vgg11 / vgg16 / vgg19: counts, forward, classes, training step at 32x32") {
  check_net({"vgg11", 132863336, 4096, 32, 2, false, "features.18.weight"});
  check_net({"vgg16", 138357544, 4096, 32, 2, false, "features.28.weight"});
  check_net({"vgg19", 143667240, 4096, 32, 2, false, "features.34.weight"});
}

TEST_CASE("resnet18 / resnet50 / resnet101: counts, forward, classes, training step") {
  check_net({"resnet18", 11689512, 512, 64, 4, true, "layer2.0.downsample.1.running_var"});
  check_net({"resnet50", 25557032, 2048, 32, 4, true, "layer1.0.downsample.0.weight"});
  check_net({"resnet101", 44549160, 2048, 32, 4, true, "layer3.22.bn3.weight"});
}

TEST_CASE("resnet56 and cifar10-cnn: counts, forward, classes, training step, in_channels") {
  check_net({"resnet56", 853018, 64, 32, 8, true, "layer3.8.conv2.weight"});
  check_net({"cifar10-cnn", 1250858, 512, 32, 8, false, "fc1.weight"});
  // in_channels changes only the first conv: (1 - 3) * out * 3 * 3 weights.
  NetOptions gray;
  gray.in_channels = 1;
  ModulePtr r56 = nets::build("resnet56", gray);
  CHECK(r56->num_parameters() == 853018 - 2 * 16 * 9);
  check_training_step(*r56, 1, 32, 4, 10, true, 0.01);
  ModulePtr cnn = nets::build("cifar10-cnn", gray);
  CHECK(cnn->num_parameters() == 1250858 - 2 * 32 * 9);
  check_training_step(*cnn, 1, 32, 4, 10, false, 0.01);
  // resnet56 adapts to other sizes through its global pool.
  NetOptions big;
  big.image_size = 40;
  ModulePtr r56b = nets::build("resnet56", big);
  NoGradGuard ng;
  r56b->eval();
  CHECK((*r56b)(randn({2, 3, 40, 40})).sizes() == Shape{2, 10});
}

TEST_CASE("resnet18 with in_channels=1 and a 48x48 input") {
  manual_seed(0);
  NetOptions o;
  o.in_channels = 1;
  o.image_size = 48;
  ModulePtr net = nets::build("resnet18", o);
  CHECK(net->num_parameters() == 11689512 - 2 * 64 * 49);
  NoGradGuard ng;
  net->eval();
  CHECK((*net)(randn({2, 1, 48, 48})).sizes() == Shape{2, 1000});
}

TEST_CASE("PadShortcut: strided subsampling with zero channels on both sides, gradient to the kept pixels") {
  std::vector<double> v(18);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i + 1);
  Tensor x = from_vector(v, {1, 2, 3, 3}).requires_grad_();
  nets::PadShortcut sc(2, 2);
  Tensor y = sc(x);
  REQUIRE(y.sizes() == Shape{1, 4, 2, 2});
  // Channel 0 and 3 are the zeros; 1 and 2 are x[:, :, ::2, ::2].
  Tensor expected = from_vector(std::vector<double>{0, 0, 0, 0, 1, 3, 7, 9, 10, 12, 16, 18, 0, 0, 0, 0}, {1, 4, 2, 2});
  CHECK_CLOSE(y, expected, 0, 0);
  ops::sum(y).backward();
  Tensor g = from_vector(std::vector<double>{1, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 1}, {1, 2, 3, 3});
  CHECK_CLOSE(x.grad(), g, 0, 0);
  // Stride 1 without extra channels is the identity.
  CHECK(nets::PadShortcut(1, 0)(x).is_same(x));
}

TEST_CASE("blocks: output shapes, and a shape-changing block without a shortcut is an error") {
  manual_seed(0);
  Tensor x = randn({2, 64, 8, 8});
  NoGradGuard ng;
  nets::Bottleneck identity_block(256, 64);
  CHECK(identity_block(randn({2, 256, 8, 8})).sizes() == Shape{2, 256, 8, 8});
  CHECK(identity_block.num_parameters() == 16384 * 2 + 36864 + 2 * (64 + 64 + 256));
  nets::BasicBlock plain(64, 64);
  CHECK(plain(x).sizes() == Shape{2, 64, 8, 8});
  nets::BasicBlock bad(64, 128, 2);
  CHECK_THROWS_KILN(bad(x), "BasicBlock(64, 128, stride=2): the shortcut gives [2, 64, 8, 8] but the residual");
  nets::Bottleneck bad_b(64, 64, 1);
  CHECK_THROWS_KILN(bad_b(x), "Bottleneck(64, 64, stride=1): the shortcut gives");
}

TEST_CASE("options that cannot work throw kiln::Error naming the net and the option") {
  NetOptions o;
  o.image_size = 62;
  CHECK_THROWS_KILN(nets::build("alexnet", o), "alexnet: image_size 62 is too small");
  o.image_size = 31;
  CHECK_THROWS_KILN(nets::build("vgg16", o), "vgg16: image_size 31 is too small");
  o.image_size = 224;
  CHECK_THROWS_KILN(nets::build("overfeat", o), "overfeat: image_size 224 is not supported");
  o.image_size = 64;
  CHECK_THROWS_KILN(nets::build("cifar10-cnn", o), "cifar10-cnn: image_size 64 is not supported");
  NetOptions w;
  w.width = 32;
  CHECK_THROWS_KILN(nets::build("resnet50", w), "resnet50: option width (32) does not apply");
  NetOptions d;
  d.depth = 3;
  CHECK_THROWS_KILN(nets::build("resnet56", d), "resnet56: option depth (3) does not apply");
  NetOptions l;
  l.lrn = true;
  CHECK_THROWS_KILN(nets::build("alexnet", l), "alexnet: option lrn does not apply");
  NetOptions a;
  a.aux = true;
  CHECK_THROWS_KILN(nets::build("vgg19", a), "vgg19: option aux does not apply");
  NetOptions c;
  c.classes = -1;
  CHECK_THROWS_KILN(nets::build("resnet18", c), "resnet18: classes must be positive, got -1");
  NetOptions ic;
  ic.in_channels = -3;
  CHECK_THROWS_KILN(nets::build("cifar10-cnn", ic), "cifar10-cnn: in_channels must be positive");
  CHECK_THROWS_KILN(nets::vgg(12), "vgg: depth must be 11, 13, 16 or 19, got 12");
  CHECK_THROWS_KILN(nets::resnet(42), "resnet: depth must be 18, 34, 50, 101 or 152, got 42");
  CHECK_THROWS_KILN(nets::cifar_resnet(57), "cifar_resnet: depth must be 6n+2");
  // A net built for 32x32 fed a different size fails in the layer that cannot take it.
  ModulePtr cnn = nets::build("cifar10-cnn");
  CHECK_THROWS_AS((*cnn)(randn({1, 3, 40, 40})), kiln::Error);
}

TEST_CASE("the zoo nets initialise as torchvision's, through init::") {
  manual_seed(11);
  ModulePtr r = nets::resnet(18);
  const Tensor c = param_of(*r, "layer1.0.conv1.weight");  // [64, 64, 3, 3]
  CHECK(rms(c) == doctest::Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.03));
  ModulePtr v = nets::vgg(11);
  CHECK(rms(param_of(*v, "classifier.3.weight")) == doctest::Approx(0.01).epsilon(0.03));
  CHECK(rms(param_of(*v, "classifier.3.bias")) == 0);
  CHECK(rms(param_of(*v, "features.0.bias")) == 0);
  CHECK(rms(param_of(*v, "features.3.weight")) == doctest::Approx(std::sqrt(2.0 / (128 * 9))).epsilon(0.03));
}
