// Zoo entries of the inception group: googlenet, inception3, unet. Turns NetOptions into
// constructor arguments (0 = the published default), rejecting options a net does not have.
//   Test: ctest --test-dir build -R nets.test_inception
#include "nets/inception.h"

namespace kiln::nets {
namespace {

// A positive option value, or `fallback` when it is 0 (unset).
int64_t pick(int64_t value, int64_t fallback, const char* net, const char* option) {
  KILN_CHECK(value >= 0, net, ": NetOptions.", option, " must be positive (0 = default ", fallback, "), got ", value);
  return value ? value : fallback;
}

// Options a net does not use are errors, not silently ignored: a typo'd experiment should fail.
void reject(bool set, const char* net, const char* option) {
  KILN_CHECK(!set, net, ": NetOptions.", option, " does not apply to this net");
}

}  // namespace

ModulePtr googlenet(const NetOptions& o) {
  reject(o.width != 0, "googlenet", "width");
  reject(o.depth != 0, "googlenet", "depth");
  return make<GoogLeNet>(pick(o.in_channels, 3, "googlenet", "in_channels"),
                         pick(o.classes, 1000, "googlenet", "classes"),
                         pick(o.image_size, 224, "googlenet", "image_size"), o.lrn, o.aux);
}

ModulePtr inception3(const NetOptions& o) {
  reject(o.width != 0, "inception3", "width");
  reject(o.depth != 0, "inception3", "depth");
  reject(o.lrn, "inception3", "lrn");
  int64_t size = pick(o.image_size, 299, "inception3", "image_size");
  KILN_CHECK(size >= 75, "inception3: image_size must be >= 75 (three stride-2 reductions), got ", size);
  KILN_CHECK(!o.aux || size >= 299,
             "inception3: the auxiliary head needs image_size >= 299 (a 17x17 Mixed_6e map "
             "for its 5x5/3 pool and 5x5 conv), got ",
             size);
  return make<Inception3>(pick(o.in_channels, 3, "inception3", "in_channels"),
                          pick(o.classes, 1000, "inception3", "classes"), o.aux);
}

ModulePtr unet(const NetOptions& o) {
  reject(o.lrn, "unet", "lrn");
  reject(o.aux, "unet", "aux");
  int64_t depth = pick(o.depth, 4, "unet", "depth");
  int64_t size = pick(o.image_size, 128, "unet", "image_size");
  KILN_CHECK(depth <= 10, "unet: depth must be 1..10 (down-sampling levels), got ", depth);
  KILN_CHECK(size % (int64_t(1) << depth) == 0, "unet: image_size ", size,
             " is not divisible by 2^depth = ", int64_t(1) << depth, " (depth ", depth,
             "); each level halves the map with a 2x2 max pool");
  return make<UNet>(pick(o.in_channels, 1, "unet", "in_channels"), pick(o.classes, 2, "unet", "classes"),
                    pick(o.width, 64, "unet", "width"), depth);
}

void register_inception_nets(std::vector<NetInfo>& zoo) {
  zoo.push_back({"googlenet",
                 "GoogLeNet (Inception v1) as convnet-benchmarks timed it: no LRN, no auxiliary heads, linear "
                 "1024->1000 head; options lrn, aux (2 heads: 13,378,280 parameters)",
                 {3, 224, 224},
                 1000,
                 6998552,
                 googlenet});
  zoo.push_back({"inception3",
                 "Inception v3 as torchvision's inception_v3(aux_logits=False): conv+BN(gamma, beta, eps 1e-3)+ReLU, "
                 "FC 2048->1000; option aux adds torchvision's AuxLogits (27,161,264 parameters)",
                 {3, 299, 299},
                 1000,
                 23834568,
                 inception3});
  zoo.push_back({"unet",
                 "UNet (Ronneberger 2015) at the paper's widths 64..1024 with same-padded convs, 128x128x1 -> 2 "
                 "logit maps; classes=1 is the RAMP astro deblending mask net (31,030,593 parameters)",
                 {1, 128, 128},
                 2,
                 31030658,
                 unet});
}

}  // namespace kiln::nets
