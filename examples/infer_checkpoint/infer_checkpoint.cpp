// Inference from a checkpoint written by `kiln train` (or a Trainer with a logdir): rebuild the
// zoo net it names, load its weights, run one batch of the test split and print predictions.
//   kiln train --model mnist-cnn --data /usr/share/datasets/fashion-mnist --epochs 1 --logdir run
//   cmake -S examples -B /tmp/ex -DCMAKE_PREFIX_PATH=<kiln prefix> && cmake --build /tmp/ex
//   /tmp/ex/infer_checkpoint/infer_checkpoint run            # newest checkpoint in run/
//   /tmp/ex/infer_checkpoint/infer_checkpoint run/ckpt-00000004 [data]
// The checkpoint's sidecar (P.json) records the model and the data it was trained on; a second
// argument names other data (same sample shape and classes).
#include <kiln/kiln.h>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace kiln;

// A string field of the sidecar's flat JSON ("model": "mnist-cnn"); enough for this example,
// which so needs no JSON library of its own.
static std::string json_field(const std::string& json, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  size_t p = json.find(tag);
  if (p == std::string::npos) return "";
  p = json.find('"', p + tag.size());
  const size_t q = json.find('"', p + 1);
  return p == std::string::npos || q == std::string::npos ? "" : json.substr(p + 1, q - p - 1);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: infer_checkpoint <checkpoint prefix | run directory> [data]\n");
    return 2;
  }
  try {
    std::string path = argv[1];
    if (std::filesystem::is_directory(path)) {
      path = latest_checkpoint(path);
      KILN_CHECK(!path.empty(), "no complete checkpoint in ", argv[1]);
    }
    Checkpoint ck = load_checkpoint(path);
    const std::string model = json_field(ck.state_json, "model");
    const std::string data_spec = argc > 2 ? argv[2] : json_field(ck.state_json, "data");
    KILN_CHECK(!model.empty() && !data_spec.empty(), path, ": the sidecar names no model or data");

    Splits data = open_dataset_dir(data_spec);
    nets::NetOptions no;
    no.in_channels = data.sample_shape[0];
    no.image_size = data.sample_shape[2];
    no.classes = data.classes;
    ModulePtr net = nets::build(model, no);
    net->load_state_dict(ck.weights, /*strict=*/true);
    net->eval();  // dropout off, batch norm on its running statistics

    // The first batch of the test split, with the data set's evaluation transforms.
    DataLoaderOptions lo;
    lo.batch_size = 8;
    lo.shuffle = false;
    lo.workers = 0;
    DataLoader loader(data.test, lo, data.default_transform(false));
    loader.start_epoch(0);
    Batch batch;
    KILN_CHECK(loader.next(batch), data_spec, ": empty test split");

    NoGradGuard no_grad;
    Tensor probs = ops::softmax(net->forward(batch.input), 1);
    Tensor pred = ops::argmax(probs, 1);
    std::vector<double> p = pred.to_vector(), t = batch.target.to_vector(), pv = probs.to_vector();
    std::printf("%s (%s, %lld parameters) on %s\n", model.c_str(), path.c_str(), (long long)net->num_parameters(),
                data_spec.c_str());
    int right = 0;
    for (int64_t i = 0; i < batch.size; ++i) {
      const int64_t k = int64_t(p[i]);
      right += k == int64_t(t[i]);
      std::printf("  sample %lld: predicted %lld (p=%.3f), label %lld\n", (long long)batch.indices[i], (long long)k,
                  pv[i * data.classes + k], (long long)t[i]);
    }
    std::printf("infer_checkpoint: %d of %lld right\n", right, (long long)batch.size);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "infer_checkpoint: %s\n", e.what());
    return 1;
  }
}
