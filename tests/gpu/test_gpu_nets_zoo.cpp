// Every zoo net on cuda:0 against the CPU (tests/gpu/net_check.h): the zoo beyond the nets
// test_gpu_nets.cpp checks (overfeat, vgg16, vgg19, resnet18, resnet101, inception3 ...; a net
// added to the zoo is checked here). Skipped without a device.
//   ctest --test-dir build -L gpu -R gpu_nets_zoo --output-on-failure
#include <doctest/doctest.h>

#include <algorithm>

#include "tests/gpu/net_check.h"

using namespace kiln;

TEST_CASE("gpu nets: the rest of the zoo's eval output, train loss and first-conv gradient on cuda match the CPU") {
  std::vector<const nets::NetInfo*> nets;
  for (const nets::NetInfo& info : nets::zoo())
    if (info.input.size() == 3 &&  // the image nets; the sequence nets: test_gpu_ops.cpp's recurrent layers
        std::find(gputest::kFirstNets.begin(), gputest::kFirstNets.end(), info.name) == gputest::kFirstNets.end())
      nets.push_back(&info);
  CHECK(!nets.empty());
  gputest::check_nets(nets);
}
