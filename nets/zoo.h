// The model zoo by name. Each net knows its default input (C, H, W) and number of classes; build()
// returns a fresh Module with PyTorch-style initialisation from the default generator.
//   kiln bench --model mnist-cnn
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "layers/module.h"

namespace kiln::nets {

// Variations a net may take; 0 / false means the net's published default.
struct NetOptions {
  int64_t classes = 0;
  int64_t in_channels = 0;
  int64_t image_size = 0;  // square input side, for nets that adapt (global pooling, UNet)
  int64_t width = 0;       // UNet: channels of the first level (64 in the paper)
  int64_t depth = 0;       // UNet: number of down/up levels (4 in the paper)
  bool lrn = false;        // GoogLeNet: the paper's LRN layers
  bool aux = false;        // GoogLeNet / Inception-v3: auxiliary classifier heads
};

struct NetInfo {
  std::string name;
  std::string description;
  Shape input;                 // C, H, W of one sample (default options)
  int64_t classes = 0;         // outputs per sample (UNet: output channels)
  int64_t parameters = 0;      // trainable parameters with default options (published figure)
  std::function<ModulePtr(const NetOptions&)> build;
};

const std::vector<NetInfo>& zoo();
// Throws kiln::Error listing the known names when `name` is unknown.
const NetInfo& find(const std::string& name);
ModulePtr build(const std::string& name, const NetOptions& options = {});

// Each group of nets appends its entries (nets/groups.inc lists the groups).
#define KILN_NET_GROUP(group) void register_##group##_nets(std::vector<NetInfo>& zoo);
#include "nets/groups.inc"
#undef KILN_NET_GROUP

// The Keras MNIST example (conv32 3x3, conv64 3x3, maxpool 2, dropout 0.25, dense 128,
// dropout 0.5, dense 10): 1,199,882 parameters.
ModulePtr mnist_cnn(int64_t in_channels = 1, int64_t classes = 10);

}  // namespace kiln::nets
