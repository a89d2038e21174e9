// The inception group of the zoo (googlenet, inception3, unet): published parameter counts,
// output shapes at the default input, the classes option, one SGD step lowering the loss on a
// tiny batch (reduced sizes for speed), and clear errors for bad options.
//   ctest --test-dir build -R nets.test_inception
#include <memory>

#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"
#include "nets/inception.h"
#include "tests/support/testing.h"

using namespace kiln;
using nets::NetOptions;

namespace {

// One plain SGD step with `loss_of` evaluated before and after it. `loss_of` must be
// deterministic for a fixed net (it reseeds the default generator where dropout is active).
std::pair<double, double> sgd_step(Module& net, const std::function<Tensor()>& loss_of, double lr) {
  Tensor loss = loss_of();
  double before = loss.item();
  net.zero_grad();
  loss.backward();
  {
    NoGradGuard ng;
    for (Tensor& p : net.parameters()) {
      REQUIRE(p.grad().defined());
      Tensor upd = p.grad() * lr;
      p.copy_(p - upd);
    }
  }
  NoGradGuard ng;
  return {before, loss_of().item()};
}

// Chained NetOptions setters (designated initialisers are C++20).
struct Opt {
  NetOptions o;
  Opt& classes(int64_t v) {
    o.classes = v;
    return *this;
  }
  Opt& in_channels(int64_t v) {
    o.in_channels = v;
    return *this;
  }
  Opt& image_size(int64_t v) {
    o.image_size = v;
    return *this;
  }
  Opt& width(int64_t v) {
    o.width = v;
    return *this;
  }
  Opt& depth(int64_t v) {
    o.depth = v;
    return *this;
  }
  Opt& lrn() {
    o.lrn = true;
    return *this;
  }
  Opt& aux() {
    o.aux = true;
    return *this;
  }
  operator NetOptions() const { return o; }  // NOLINT: implicit on purpose
};

Tensor labels(std::vector<double> v) {
  int64_t n = int64_t(v.size());
  return from_vector(v, {n}, DType::int64);
}

Tensor eval_forward(Module& net, const Shape& input) {
  net.eval();
  NoGradGuard ng;
  Generator g(3);
  return net(randn(input, {}, &g));
}

}  // namespace

TEST_CASE("googlenet: parameter counts with and without LRN and auxiliary heads") {
  CHECK(nets::find("googlenet").parameters == 6998552);
  CHECK(nets::build("googlenet")->num_parameters() == 6998552);
  // LRN has no parameters.
  CHECK(nets::build("googlenet", Opt().lrn())->num_parameters() == 6998552);
  // Aux heads at 224 (4a map 14x14, avgpool 5x5/3 -> 4x4):
  //   aux1 on 512 ch: conv 512*128+128 = 65,664; fc1 (128*4*4=2048)*1024+1024 = 2,098,176;
  //                   fc2 1024*1000+1000 = 1,025,000; total 3,188,840.
  //   aux2 on 528 ch: conv 528*128+128 = 67,712; same FCs; total 3,190,888.
  //   6,998,552 + 3,188,840 + 3,190,888 = 13,378,280 (nets.md 1.5).
  CHECK(nets::build("googlenet", Opt().aux())->num_parameters() == 13378280);
  CHECK(nets::build("googlenet", Opt().lrn().aux())->num_parameters() == 13378280);
  // 10 classes: the head loses (1024 + 1) * 990.
  CHECK(nets::build("googlenet", Opt().classes(10))->num_parameters() == 6998552 - 1025 * 990);
}

TEST_CASE("googlenet: forward at 224 gives [1, 1000]; classes changes the head") {
  manual_seed(0);
  ModulePtr net = nets::build("googlenet", Opt().lrn());
  CHECK(eval_forward(*net, {1, 3, 224, 224}).sizes() == Shape{1, 1000});
  ModulePtr small = nets::build("googlenet", Opt().classes(7).image_size(96));
  CHECK(eval_forward(*small, {1, 3, 96, 96}).sizes() == Shape{1, 7});
}

TEST_CASE("googlenet: one SGD step at 96x96 lowers the loss") {
  manual_seed(1);
  ModulePtr net = nets::build("googlenet", Opt().classes(10).image_size(96));
  net->train();  // no dropout or BN in this net: the loss is a deterministic function of weights
  Generator g(5);
  Tensor x = randn({2, 3, 96, 96}, {}, &g);
  Tensor y = labels({3, 8});
  auto [before, after] = sgd_step(
      *net, [&] { return ops::cross_entropy((*net)(x), y); }, 0.1);
  CHECK(after < before);
}

TEST_CASE("googlenet: auxiliary logits in training mode only, with gradients") {
  manual_seed(2);
  auto net =
      std::dynamic_pointer_cast<nets::GoogLeNet>(nets::build("googlenet", Opt().classes(5).image_size(96).aux()));
  REQUIRE(net);
  Generator g(6);
  Tensor x = randn({2, 3, 96, 96}, {}, &g);
  net->train();
  Tensor out = (*net)(x);
  CHECK(out.sizes() == Shape{2, 5});
  REQUIRE(net->aux_outputs().size() == 2);
  for (const Tensor& a : net->aux_outputs()) CHECK(a.sizes() == Shape{2, 5});
  // The paper's loss: main + 0.3 * each auxiliary loss.
  Tensor y = labels({1, 4});
  Tensor loss = ops::cross_entropy(out, y) + ops::cross_entropy(net->aux_outputs()[0], y) * 0.3 +
                ops::cross_entropy(net->aux_outputs()[1], y) * 0.3;
  loss.backward();
  for (const auto& entry : net->named_parameters())
    CHECK_MESSAGE(entry.second.grad().defined(), entry.first, " got no gradient");
  net->eval();
  NoGradGuard ng;
  (*net)(x);
  CHECK(net->aux_outputs().empty());
  // Aux heads sized for 96 refuse another input size in training mode.
  net->train();
  CHECK_THROWS_KILN((*net)(randn({1, 3, 128, 128}, {}, &g)), "auxiliary heads were built for a 6x6 4a map");
}

TEST_CASE("googlenet: bad options") {
  CHECK_THROWS_KILN(nets::build("googlenet", Opt().image_size(64).aux()),
                    "googlenet: the auxiliary heads need a 4a feature map of at least 5x5");
  CHECK_THROWS_KILN(nets::build("googlenet", Opt().width(32)), "googlenet: NetOptions.width does not apply");
  CHECK_THROWS_KILN(nets::build("googlenet", Opt().classes(-3)), "googlenet: NetOptions.classes must be positive");
}

TEST_CASE("inception3: parameter counts (torchvision's, without and with AuxLogits) and key names") {
  ModulePtr net = nets::build("inception3");
  CHECK(nets::find("inception3").parameters == 23834568);
  CHECK(net->num_parameters() == 23834568);
  // torchvision.models.inception_v3(aux_logits=True, init_weights=False): 27,161,264 (nets.md 3).
  CHECK(nets::build("inception3", Opt().aux())->num_parameters() == 27161264);
  // BatchNorm running statistics are buffers, not parameters; keys follow torchvision.
  bool found_param = false, found_buffer = false;
  for (auto& [name, t] : net->named_parameters())
    if (name == "Mixed_7c.branch3x3dbl_3b.bn.weight") found_param = t.sizes() == Shape{384};
  for (auto& [name, t] : net->named_buffers())
    if (name == "Conv2d_1a_3x3.bn.running_var") found_buffer = t.sizes() == Shape{32};
  CHECK(found_param);
  CHECK(found_buffer);
}

TEST_CASE("inception3: forward at 299 gives [1, 1000]; classes changes the head") {
  manual_seed(3);
  ModulePtr net = nets::build("inception3");
  CHECK(eval_forward(*net, {1, 3, 299, 299}).sizes() == Shape{1, 1000});
  ModulePtr small = nets::build("inception3", Opt().classes(12).in_channels(1).image_size(75));
  CHECK(small->num_parameters() == 23834568 - 2049 * 988 - 2 * 9 * 32);
  CHECK(eval_forward(*small, {1, 1, 75, 75}).sizes() == Shape{1, 12});
}

TEST_CASE("inception3: one SGD step at 75x75 lowers the loss (batch-norm in training mode)") {
  manual_seed(4);
  ModulePtr net = nets::build("inception3", Opt().classes(10).image_size(75));
  net->train();
  Generator g(7);
  Tensor x = randn({2, 3, 75, 75}, {}, &g);
  Tensor y = labels({2, 9});
  // Batch statistics make the loss a function of the batch; reseeding fixes the dropout mask.
  auto loss_of = [&] {
    manual_seed(99);
    return ops::cross_entropy((*net)(x), y);
  };
  auto [before, after] = sgd_step(*net, loss_of, 0.05);
  CHECK(after < before);
}

TEST_CASE("inception3: bad options") {
  CHECK_THROWS_KILN(nets::build("inception3", Opt().image_size(74)), "inception3: image_size must be >= 75");
  CHECK_THROWS_KILN(nets::build("inception3", Opt().image_size(128).aux()),
                    "inception3: the auxiliary head needs image_size >= 299");
  CHECK_THROWS_KILN(nets::build("inception3", Opt().lrn()), "inception3: NetOptions.lrn does not apply");
  ModulePtr net = nets::build("inception3", Opt().image_size(75));
  net->eval();
  NoGradGuard ng;
  CHECK_THROWS_KILN((*net)(randn({1, 3, 64, 64})), "inception3: expected input [N, C, H, W] with H, W >= 75");
}

TEST_CASE("unet: parameter counts, the paper's and the RAMP astro variant's") {
  CHECK(nets::find("unet").parameters == 31030658);
  CHECK(nets::build("unet")->num_parameters() == 31030658);
  // One sigmoid mask instead of 2 softmax maps: the 1x1 head loses 64 + 1.
  CHECK(nets::build("unet", Opt().classes(1))->num_parameters() == 31030593);
  // width 8, depth 2, 1 -> 1, level by level (3x3 conv: in*out*9 + out):
  //   down1 (1->8, 8->8) 80+584; down2 (8->16, 16->16) 1,168+2,320; bottom (16->32, 32->32) 4,640+9,248;
  //   up2 32->16 2x2 2,064; dec2 (32->16, 16->16) 4,624+2,320; up1 16->8 520; dec1 (16->8, 8->8) 1,160+584;
  //   head 8->1 9. Total 29,321.
  CHECK(nets::build("unet", Opt().classes(1).image_size(32).width(8).depth(2))->num_parameters() == 29321);
}

TEST_CASE("unet: forward at 128 keeps the map size; classes sets the output channels") {
  manual_seed(5);
  ModulePtr net = nets::build("unet");
  CHECK(eval_forward(*net, {1, 1, 128, 128}).sizes() == Shape{1, 2, 128, 128});
  ModulePtr astro = nets::build("unet", Opt().classes(1).in_channels(3).width(4));
  CHECK(eval_forward(*astro, {2, 3, 48, 64}).sizes() == Shape{2, 1, 48, 64});
}

TEST_CASE("unet: one SGD step lowers BCE-with-logits against a random binary mask") {
  manual_seed(6);
  ModulePtr net = nets::build("unet", Opt().classes(1).image_size(32).width(8).depth(2));
  net->train();
  Generator g(8);
  Tensor x = randn({2, 1, 32, 32}, {}, &g);
  Tensor mask = zeros({2, 1, 32, 32});
  bernoulli_(mask, 0.3, &g);
  auto [before, after] = sgd_step(
      *net, [&] { return ops::binary_cross_entropy_with_logits((*net)(x), mask); }, 0.5);
  CHECK(after < before);
}

TEST_CASE("unet: bad options") {
  CHECK_THROWS_KILN(nets::build("unet", Opt().image_size(100)),
                    "unet: image_size 100 is not divisible by 2^depth = 16 (depth 4)");
  CHECK_THROWS_KILN(nets::build("unet", Opt().aux()), "unet: NetOptions.aux does not apply");
  CHECK_THROWS_KILN(nets::build("unet", Opt().depth(11)), "unet: depth must be 1..10");
  ModulePtr net = nets::build("unet", Opt().width(2).depth(2));
  net->eval();
  NoGradGuard ng;
  CHECK_THROWS_KILN((*net)(randn({1, 1, 30, 32})),
                    "unet: input height and width must be divisible by 2^depth = 4 (depth 2), got 30x32");
  CHECK_THROWS_KILN((*net)(randn({1, 3, 32, 32})), "unet: expected input [N, 1, H, W]");
}
