// The runtime flags of kiln train, eval and bench (tools/kiln/runtime_flags.h).
#include "tools/kiln/runtime_flags.h"

#include "engine/backend_preference.h"
#include "engine/backends/backends.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "kernels/common/parallel.h"
#include "tools/kiln/flag_checks.h"

namespace kiln::cli {
namespace {

const char* const kDtypes[] = {"float32", "bfloat16", "float16"};

// "'a', 'b' or 'c'"
std::string quoted_choices(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("'" + names[i] + "'");
  return s;
}

std::string backend_help() {
  std::string names;
  for (const std::string& n : backend_choices()) names += (names.empty() ? "" : ", ") + n;
  return names + " (a comma list is a preference order; `kiln info` shows which ops each has)";
}

}  // namespace

void add_runtime_flags(CLI::App* sub, RuntimeFlags* f, const std::vector<std::string>& layouts) {
  sub->add_option("--device", f->device, "cpu or cuda[:N] (cuda under mpirun/srun: the local rank's GPU)")
      ->capture_default_str();
  sub->add_option("--backend", f->backend, backend_help())->capture_default_str();
  sub->add_option("--threads", f->threads, "threads inside ops (0: KILN_NUM_THREADS, OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(whole(0, kMaxThreads));
  if (layouts.empty()) return;
  f->layout = layouts.front();
  sub->add_option("--dtype", f->dtype,
                  "float32, or bfloat16/float16: mixed precision (float32 master weights, half activations; "
                  "float16 training with dynamic loss scaling; oneDNN's bf16 kernels on CPUs, tensor cores on GPUs)")
      ->capture_default_str();
  std::string help = "activations: ";
  for (const std::string& l : layouts)
    help += l + (l == "nhwc" ? " (channels-last)" : l == "auto" ? " (nhwc on CPUs)" : "") + (l == layouts.back() ? "" : ", ");
  sub->add_option("--layout", f->layout, help)->capture_default_str();
}

Device runtime_device(const RuntimeFlags& f) {
  Device d(f.device);
  if (d.is_cuda() && f.device == "cuda" && cuda::local_rank() >= 0) d.index = cuda::device_for_local_rank();
  return d;
}

std::string runtime_device_name(const RuntimeFlags& f) {
  const Device d = runtime_device(f);
  return d.index == Device(f.device).index ? f.device : d.str();
}

DType runtime_dtype(const RuntimeFlags& f) {
  if (f.dtype == "bfloat16") return DType::bfloat16;
  if (f.dtype == "float16") return DType::float16;
  KILN_CHECK(f.dtype == "float32", "--dtype: ", quoted_choices({std::begin(kDtypes), std::end(kDtypes)}), ", not '",
             f.dtype, "'");
  return DType::float32;
}

void apply_runtime_flags(const RuntimeFlags& f, const std::vector<std::string>& layouts) {
  const Device device = runtime_device(f);
  if (device.is_cuda()) cuda::check_device(device);  // "built without CUDA", "no CUDA device", "no device N"
  check_backend_list(f.backend, "--backend");
  if (!layouts.empty()) {
    runtime_dtype(f);
    bool known = false;
    for (const std::string& l : layouts) known = known || l == f.layout;
    KILN_CHECK(known, "--layout: ", quoted_choices(layouts), ", not '", f.layout, "'");
  }
  if (f.threads > 0) set_num_threads(f.threads);
  if (f.backend != "auto") set_backend_preference(f.backend);  // auto: KILN_BACKEND's, if set, stays
}

}  // namespace kiln::cli
