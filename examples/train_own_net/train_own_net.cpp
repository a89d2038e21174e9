// A user's own net, defined as a Module and trained with kiln's Trainer.
//   cmake -S examples -B /tmp/ex -DCMAKE_PREFIX_PATH=<kiln prefix> && cmake --build /tmp/ex
//   /tmp/ex/train_own_net/train_own_net /usr/share/datasets/fashion-mnist 2   # ~88% in two epochs
//   /tmp/ex/train_own_net/train_own_net                                       # synthetic, seconds
// Arguments: a data set (a directory kiln reads, or synthetic:CxHxW:CLASSES:N[:learnable]) and
// the number of epochs. Prints one line per epoch and the test accuracy.
#include <kiln/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace kiln;

// Two convolutions and a classifier. Children registered with register_module appear in the
// state dict under their names ("features.0.weight", "classifier.weight", ...).
class SmallNet : public Module {
 public:
  SmallNet(int64_t in_channels, int64_t side, int64_t classes) {
    features_ = register_module("features", make<Sequential>(std::initializer_list<ModulePtr>{
        make<Conv2d>(in_channels, 16, 3, 1, 1), make<ReLU>(), make<MaxPool2d>(2),
        make<Conv2d>(16, 32, 3, 1, 1), make<ReLU>(), make<MaxPool2d>(2)}));
    classifier_ = register_module("classifier", make<Linear>(32 * (side / 4) * (side / 4), classes));
  }
  Tensor forward(const Tensor& x) override { return classifier_->forward(features_->forward(x).flatten(1)); }
  std::string repr() const override { return "SmallNet"; }

 private:
  std::shared_ptr<Sequential> features_;
  std::shared_ptr<Linear> classifier_;
};

int main(int argc, char** argv) {
  const std::string data_spec = argc > 1 ? argv[1] : "synthetic:1x28x28:10:2048:learnable";
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 1;
  try {
    Splits data = open_dataset_dir(data_spec);
    const Shape& in = data.sample_shape;  // C, H, W
    manual_seed(0);
    auto net = make<SmallNet>(in[0], in[2], data.classes);
    std::printf("%s: %lld parameters, %s (%lld training samples)\n", net->repr().c_str(),
                (long long)net->num_parameters(), data.name.c_str(), (long long)data.train->size());

    train::TrainConfig cfg;
    cfg.model_name = "SmallNet";  // recorded in checkpoints (none here: no logdir)
    cfg.epochs = epochs;
    cfg.batch_size = 64;
    cfg.optimizer.name = "adam";
    cfg.optimizer.lr = 2e-3;
    cfg.workers = 1;
    cfg.progress = false;
    cfg.epoch_lines = false;
    train::Trainer trainer(net, data, cfg);
    trainer.fit();
    for (const train::EpochSummary& e : trainer.history())
      std::printf("epoch %lld: train loss %.4f top-1 %.4f, %.0f images/s\n", (long long)e.epoch, e.train_loss,
                  e.train_top1, e.images_per_s);
    train::EvalResult r = trainer.evaluate(*data.test);
    std::printf("test: loss %.4f top-1 %.4f (%lld samples)\n", r.loss, r.top1, (long long)r.samples);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "train_own_net: %s\n", e.what());
    return 1;
  }
}
