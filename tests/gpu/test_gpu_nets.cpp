// Every zoo net on cuda:0 against the CPU (tests/gpu/net_check.h): the nets named first, mnist-cnn,
// cifar10-cnn, alexnet, vgg11, googlenet, resnet50, resnet56 and unet. The rest of the zoo:
// test_gpu_nets_zoo.cpp. Skipped without a device.
//   ctest --test-dir build -L gpu -R gpu_nets --output-on-failure
#include <doctest/doctest.h>

#include "tests/gpu/net_check.h"

using namespace kiln;

TEST_CASE("gpu nets: the first nets' eval output, train loss and first-conv gradient on cuda match the CPU") {
  std::vector<const nets::NetInfo*> nets;
  for (const std::string& n : gputest::kFirstNets) nets.push_back(&nets::find(n));
  gputest::check_nets(nets);
}
