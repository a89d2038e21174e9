#include "nets/zoo.h"

#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/pool.h"

namespace kiln::nets {

ModulePtr mnist_cnn(int64_t in_channels, int64_t classes) {
  auto net = make<Sequential>();
  net->add("conv1", make<Conv2d>(in_channels, 32, 3))
      .add("relu1", make<ReLU>())
      .add("conv2", make<Conv2d>(32, 64, 3))
      .add("relu2", make<ReLU>())
      .add("pool", make<MaxPool2d>(2))
      .add("drop1", make<Dropout>(0.25))
      .add("flatten", make<Flatten>())
      .add("fc1", make<Linear>(64 * 12 * 12, 128))
      .add("relu3", make<ReLU>())
      .add("drop2", make<Dropout>(0.5))
      .add("fc2", make<Linear>(128, classes));
  return net;
}

const std::vector<NetInfo>& zoo() {
  static const std::vector<NetInfo> nets = [] {
    std::vector<NetInfo> v;
    v.push_back({"mnist-cnn", "Keras MNIST example CNN", {1, 28, 28}, 10, 1199882, [](const NetOptions& o) {
                   return mnist_cnn(o.in_channels ? o.in_channels : 1, o.classes ? o.classes : 10);
                 }});
#define KILN_NET_GROUP(group) register_##group##_nets(v);
#include "nets/groups.inc"
#undef KILN_NET_GROUP
    return v;
  }();
  return nets;
}

const NetInfo& find(const std::string& name) {
  std::string known;
  for (const NetInfo& n : zoo()) {
    if (n.name == name) return n;
    known += (known.empty() ? "" : ", ") + n.name;
  }
  KILN_THROW("unknown model '", name, "' (known: ", known, ")");
}

ModulePtr build(const std::string& name, const NetOptions& options) { return find(name).build(options); }

}  // namespace kiln::nets
