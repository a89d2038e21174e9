// `kiln export --onnx`: a zoo net, or a checkpoint's weights in it, as an ONNX model (opset 13,
// eval mode: batch norm on running statistics, dropout off). The graph comes from tracing one
// forward (io/onnx/onnx.h); its input is [N, C, H, W] with N symbolic.
//   kiln export --onnx resnet18.onnx --model resnet18
//   kiln export --onnx fmnist.onnx --checkpoint runs/fmnist/ckpt-00000938
//   ctest --test-dir build -R onnx
#include <cstdio>

#include <nlohmann/json.hpp>

#include "io/formats/checkpoint.h"
#include "io/onnx/onnx.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/flag_checks.h"

namespace kiln::cli {
namespace {

struct ExportOptions {
  std::string onnx, model, checkpoint;
  int64_t batch = 1, classes = 0, in_channels = 0, image_size = 0;
  bool static_batch = false;
};

int run_export(const ExportOptions& o) {
  KILN_CHECK(!o.onnx.empty(), "--onnx OUT.onnx is required");
  check_output_path(o.onnx, "--onnx");
  KILN_CHECK(o.batch > 0, "--batch must be positive, got ", o.batch);
  Checkpoint ck;
  std::string model = o.model;
  if (!o.checkpoint.empty()) {
    ck = load_checkpoint(o.checkpoint);
    auto j = nlohmann::json::parse(ck.state_json, nullptr, false);
    if (model.empty() && j.is_object() && j.contains("model")) {
      KILN_CHECK(j["model"].is_string(), "checkpoint ", o.checkpoint, ": \"model\" is ", j["model"].dump(),
                 ", not a string");
      model = j["model"].get<std::string>();
    }
    KILN_CHECK(!model.empty(), "checkpoint ", o.checkpoint, " names no model; pass --model");
  }
  KILN_CHECK(!model.empty(), "--model NAME (a zoo net) or --checkpoint PREFIX is required");
  const nets::NetInfo& info = nets::find(model);
  nets::NetOptions opts;
  opts.classes = o.classes;
  opts.in_channels = o.in_channels;
  opts.image_size = o.image_size;
  if (!o.checkpoint.empty() && o.classes == 0 && o.in_channels == 0) {
    // A checkpoint may come from other data than the net's default: its weights say the input
    // channels (the first 4-d weight) and the classes (the last bias).
    const NamedTensors& w = ck.weights;
    for (const auto& [name, t] : w)
      if (t.dim() == 4) {
        opts.in_channels = t.size(1);
        break;
      }
    for (auto it = w.rbegin(); it != w.rend(); ++it)
      if (it->second.dim() == 1 && it->first.size() > 5 && it->first.compare(it->first.size() - 5, 5, ".bias") == 0) {
        opts.classes = it->second.size(0);
        break;
      }
  }
  ModulePtr net = nets::build(model, opts);
  if (!o.checkpoint.empty()) net->load_state_dict(ck.weights, true);
  Shape input = info.input;
  if (opts.in_channels > 0) input[0] = opts.in_channels;
  if (o.image_size > 0) input[1] = input[2] = o.image_size;
  input.insert(input.begin(), o.batch);
  onnx::ExportOptions eo;
  eo.dynamic_batch = !o.static_batch;
  eo.graph_name = model;
  onnx::Model m = onnx::export_module(*net, input, eo);
  onnx::save(m, o.onnx);
  std::printf("wrote %s: %s, input %s, %zu nodes, %zu initializers, opset %lld\n", o.onnx.c_str(), model.c_str(),
              shape_str(input).c_str(), m.graph.nodes.size(), m.graph.initializers.size(), (long long)m.opset);
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand("export", "write a zoo net or a checkpoint as an ONNX model (eval mode)");
  sub->add_option("--onnx", o->onnx, "output .onnx file")->required();
  sub->add_option("--model", o->model, "zoo net name (default: the checkpoint's)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint prefix or .json whose weights to export");
  sub->add_option("--batch", o->batch, "batch size of the traced forward (the ONNX batch dim stays symbolic)")
      ->capture_default_str()
      ->check(whole(1, kMaxBatch));
  sub->add_option("--classes", o->classes, "outputs of the net (default: the net's or the checkpoint's)")
      ->check(whole(0, 1 << 20));
  sub->add_option("--in-channels", o->in_channels, "input channels (default: the net's or the checkpoint's)")
      ->check(whole(0, 1 << 16));
  sub->add_option("--image-size", o->image_size, "square input side, for nets that take several")
      ->check(whole(0, 1 << 16));
  sub->add_flag("--static-batch", o->static_batch, "fix the batch dim to --batch instead of a symbolic N");
  return Command{sub, [o] { return run_export(*o); }};
}

}  // namespace kiln::cli
