// The model zoo by name. Each net knows its default input (C, H, W) and number of classes; build()
// returns a fresh Module with PyTorch-style initialisation from the default generator.
//   kiln bench --model mnist-cnn
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "layers/module.h"

namespace kiln::nets {

struct NetInfo {
  std::string name;
  std::string description;
  Shape input;  // C, H, W of one sample
  int64_t classes = 0;
  std::function<ModulePtr()> build;
};

const std::vector<NetInfo>& zoo();
// Throws kiln::Error listing the known names when `name` is unknown.
const NetInfo& find(const std::string& name);
ModulePtr build(const std::string& name);

// The Keras MNIST example (conv32 3x3, conv64 3x3, maxpool 2, dropout 0.25, dense 128,
// dropout 0.5, dense 10): 1,199,882 parameters.
ModulePtr mnist_cnn(int64_t in_channels = 1, int64_t classes = 10);

}  // namespace kiln::nets
