// `kiln info`: version, machine, threads, backend preference, the GPU (toolkit, driver and library
// versions, archs built, devices), registered kernels and the model zoo (input shape, parameters,
// default bench batch).
#include <cstdio>
#include <string>

#include "bench/harness/convnet.h"
#include "bench/harness/results.h"
#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"

// The CUDA architectures the build targets (the KILN_CUDA_ARCHS cache variable, passed by
// tools/CMakeLists.txt).
#ifndef KILN_CUDA_ARCHS
#define KILN_CUDA_ARCHS ""
#endif

namespace kiln::cli {

namespace {

// cuDNN >= 9 and NCCL >= 2.9 encode major*10000 + minor*100 + patch, older ones major*1000 + ...
std::string library_version(int v, int new_scheme_from) {
  if (v <= 0) return "not built";
  const int major_div = v >= new_scheme_from ? 10000 : 1000;
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / 100) + "." + std::to_string(v % 100);
}

void print_gpu() {
  if (!cuda::built_with_cuda()) {
    std::printf("gpu: none (kiln was built without CUDA)\n");
    return;
  }
  const cuda::Versions v = cuda::versions();
  const std::string archs = KILN_CUDA_ARCHS;
  std::printf("cuda: runtime %s, driver %s, cuBLAS %s, cuDNN %s, NCCL %s, archs built: %s\n",
              cuda::cuda_version_string(v.runtime).c_str(), cuda::cuda_version_string(v.driver).c_str(),
              library_version(v.cublas, 0).c_str(), library_version(v.cudnn, 90000).c_str(),
              library_version(v.nccl, 20900).c_str(), archs.empty() ? "none (host code only)" : archs.c_str());
  const int n = cuda::device_count();
  if (n == 0) {
    std::printf("gpu: none (%s)\n", cuda::no_device_reason().c_str());
    return;
  }
  std::printf("gpus: %d\n", n);
  for (int i = 0; i < n; ++i) {
    const cuda::DeviceProperties p = cuda::device_properties(i);
    std::printf("  cuda:%d  %s, %.1f GiB, compute capability %d.%d, %d SMs\n", i, p.name.c_str(),
                double(p.total_memory) / double(1u << 30), p.major, p.minor, p.sm_count);
  }
}

}  // namespace

Command add_info(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "version, machine, threads, registered kernels, models");
  return Command{sub, [] {
                   const bench::MachineInfo m = bench::machine_info();
                   std::printf("kiln %s\n", bench::kiln_version());
                   std::printf("host: %s, %s, %d hardware threads\n", m.hostname.c_str(), m.cpu.c_str(), m.cores);
                   std::printf("threads: %d\n", num_threads());
                   std::printf("backend preference: %s\n", backend_preference().c_str());
                   print_gpu();
                   std::printf("ops:\n");
                   for (const OpTableBase* op : registry().ops()) {
                     std::string c;
                     for (auto& s : op->candidates()) c += (c.empty() ? "" : ", ") + s;
                     std::printf("  %-24s %s\n", op->name().c_str(), c.c_str());
                   }
                   std::printf("zoo:\n");
                   for (const auto& n : nets::zoo()) {
                     std::string shape;
                     for (int64_t d : n.input) shape += (shape.empty() ? "" : "x") + std::to_string(d);
                     const std::string about =
                         n.description.size() > 70 ? n.description.substr(0, 67) + "..." : n.description;
                     std::printf("  %-12s %-10s %12lld params  batch %-4lld %s\n", n.name.c_str(), shape.c_str(),
                                 static_cast<long long>(n.parameters),
                                 static_cast<long long>(bench::default_batch(n.name)), about.c_str());
                   }
                   // One line with every name, for scripts (tools/dev greps it).
                   std::printf("models:");
                   for (const auto& n : nets::zoo()) std::printf(" %s", n.name.c_str());
                   std::printf("\n");
                   return 0;
                 }};
}

}  // namespace kiln::cli
