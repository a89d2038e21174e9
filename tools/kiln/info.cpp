// `kiln info [--json]`: what a support ticket needs. Version, compiler and build options; the
// backends built and the versions of their libraries (oneDNN, CUDA runtime/driver, cuBLAS, cuDNN,
// NCCL, MPI, OpenMP), compiled and loaded; the CPU model and the ISA extensions usable at run time
// (the CPUID code of kernels/cpu/native/cpu_features.cpp); threads; GPUs; registered kernels and
// the model zoo. The text and the JSON are printed from one json object, so they cannot disagree.
// No call here may fail for want of a device or driver: such a library is reported with a reason.
// JSON schema ("schema": "kiln-info/1"): README.md, section "kiln info --json".
//   ctest --test-dir build -R cli.info
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/harness/convnet.h"
#include "bench/harness/results.h"
#include "engine/backends/backends.h"
#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "engine/version.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"

#if defined(KILN_HAVE_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#endif
#if defined(KILN_HAVE_MPI)
#include <mpi.h>
#endif
#if defined(KILN_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif
#if defined(KILN_HAVE_CUBLAS)
#include <cublas_v2.h>  // not cublas_api.h alone: CUDA 11 requires CUBLASAPI, which cublas_v2.h defines
#endif
#if defined(KILN_HAVE_CUDNN)
#include <cudnn.h>
#endif
#if defined(KILN_HAVE_NCCL)
#include <nccl.h>
#endif

// Set for this file by tools/CMakeLists.txt: the KILN_WITH_* options and KILN_HAVE_* results as
// configured. Version, build type and CUDA architectures come from kiln::build_info().
#ifndef KILN_BUILD_OPTIONS
#define KILN_BUILD_OPTIONS ""
#endif

namespace kiln::cli {

namespace {

using json = nlohmann::json;

// cuDNN >= 9 and NCCL >= 2.9 encode major*10000 + minor*100 + patch, older ones major*1000 + ...
std::string library_version(int v, int new_scheme_from) {
  if (v <= 0) return "";
  const int major_div = v >= new_scheme_from ? 10000 : 1000;
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / 100) + "." + std::to_string(v % 100);
}

std::string compiler() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

// "KILN_WITH_CUDA=ON KILN_WITH_MPI=OFF" -> {"KILN_WITH_CUDA": true, "KILN_WITH_MPI": false}
// "75 80 90": the architectures kiln's CUDA code was built for (build_info() lists them with ';').
std::string cuda_archs() {
  std::string a = kiln::build_info().cuda_archs;
  std::replace(a.begin(), a.end(), ';', ' ');
  return a;
}

json build_options() {
  json o = json::object();
  const std::string s = KILN_BUILD_OPTIONS;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = s.find(' ', i);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(i, end - i);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      const std::string v = item.substr(eq + 1);
      o[item.substr(0, eq)] = v == "ON" || v == "TRUE" || v == "1";
    }
    i = end + 1;
  }
  return o;
}

json onednn() {
  json j = {{"built", false}};
#if defined(KILN_HAVE_ONEDNN)
  const dnnl_version_t* v = dnnl_version();
  j = {{"built", true},
       {"version", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)},
       {"hash", v->hash ? v->hash : ""}};
#endif
  return j;
}

json mpi() {
  json j = {{"built", false}};
#if defined(KILN_HAVE_MPI)
  // MPI_Get_library_version and MPI_Get_version may be called before MPI_Init (MPI-3 8.1.1).
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0, major = 0, minor = 0;
  std::string library;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) library.assign(lib, size_t(len > 0 ? len : 0));
  while (!library.empty() && (library.back() == '\n' || library.back() == ' ' || library.back() == '\0'))
    library.pop_back();
  if (const size_t nl = library.find('\n'); nl != std::string::npos) library.resize(nl);
  MPI_Get_version(&major, &minor);
  j = {{"built", true},
       {"library", library},
       {"standard", std::to_string(major) + "." + std::to_string(minor)},
       {"compiled_standard", std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION)}};
#endif
  return j;
}

json openmp() {
#if defined(_OPENMP)
  // _OPENMP is the yyyymm of the specification implemented.
  const int v = _OPENMP;
  const char* spec = v >= 202111 ? "5.2" : v >= 202011 ? "5.1" : v >= 201811 ? "5.0" : v >= 201511 ? "4.5"
                   : v >= 201307 ? "4.0" : v >= 201107 ? "3.1" : "3.0 or older";
  return {{"built", true}, {"version", v}, {"spec", spec}};
#else
  return {{"built", false}};
#endif
}

// CUDA and its libraries: what was compiled against and what is loaded. Without a driver the
// runtime still answers its own version; the driver is "" then.
json cuda_libraries() {
  json j = json::object();
  if (!cuda::built_with_cuda()) {
    for (const char* k : {"cuda", "cublas", "cudnn", "nccl"}) j[k] = {{"built", false}};
    return j;
  }
  const cuda::Versions v = cuda::versions();
  int compiled_cuda = 0, compiled_cublas = 0, compiled_cudnn = 0, compiled_nccl = 0;
#if defined(CUDART_VERSION)
  compiled_cuda = CUDART_VERSION;
#endif
#if defined(CUBLAS_VER_MAJOR)
  compiled_cublas = CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
#endif
#if defined(CUDNN_VERSION)
  compiled_cudnn = CUDNN_VERSION;
#endif
#if defined(NCCL_VERSION_CODE)
  compiled_nccl = NCCL_VERSION_CODE;
#endif
  const std::string driver = v.driver > 0 ? cuda::cuda_version_string(v.driver) : "";
  j["cuda"] = {{"built", true},
               {"runtime", cuda::cuda_version_string(v.runtime)},
               {"compiled", cuda::cuda_version_string(compiled_cuda)},
               {"driver", driver},
               {"archs", cuda_archs()},
#if defined(KILN_EMU_DEVICE)
               {"emulated", true}};
#else
               {"emulated", false}};
#endif
  j["cublas"] = {{"built", v.cublas > 0 || compiled_cublas > 0},
                 {"version", library_version(v.cublas, 0)},
                 {"compiled", library_version(compiled_cublas, 0)}};
  j["cudnn"] = {{"built", compiled_cudnn > 0},
                {"version", library_version(v.cudnn, 90000)},
                {"compiled", library_version(compiled_cudnn, 90000)}};
  j["nccl"] = {{"built", compiled_nccl > 0},
               {"version", library_version(v.nccl, 20900)},
               {"compiled", library_version(compiled_nccl, 20900)}};
  return j;
}

json gpus() {
  json j = {{"count", 0}, {"reason", ""}, {"devices", json::array()}};
  if (!cuda::built_with_cuda()) {
    j["reason"] = "kiln was built without CUDA";
    return j;
  }
  const int n = cuda::device_count();
  if (n == 0) {
    j["reason"] = cuda::no_device_reason();
    return j;
  }
  j["count"] = n;
  for (int i = 0; i < n; ++i) {
    try {
      const cuda::DeviceProperties p = cuda::device_properties(i);
      j["devices"].push_back({{"index", i},
                              {"name", p.name},
                              {"memory_bytes", p.total_memory},
                              {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                              {"sm_count", p.sm_count}});
    } catch (const std::exception& e) {
      j["devices"].push_back({{"index", i}, {"error", e.what()}});
    }
  }
  return j;
}

json cpu() {
  const native::CpuIsa& i = native::cpu_isa_detected();
  const bench::MachineInfo m = bench::machine_info();
  // The kernel each native op family takes, after KILN_CPU_ISA (cpu_features.h kernel_paths).
  const native::KernelPaths p = native::kernel_paths(native::cpu_isa());
  return {{"model", m.cpu},
          {"hardware_threads", m.cores},
          {"arch", native::cpu_arch_name(native::build_arch())},
          {"isa",
           {{"fma", i.fma},
            {"avx2", i.avx2},
            {"avx512f", i.avx512f},
            {"avx512bw", i.avx512bw},
            {"avx512vl", i.avx512vl},
            {"avx512dq", i.avx512dq},
            {"avx512_bf16", i.avx512_bf16},
            {"amx_tile", i.amx_tile},
            {"amx_bf16", i.amx_bf16},
            {"amx_int8", i.amx_int8},
            {"vsx", i.vsx},
            {"asimd", i.asimd},
            {"sve", i.sve}}},
          {"sve_bits", i.sve_bits},
          {"isa_cap", native::cpu_isa_cap()},
          {"kernels", native::cpu_features_str()},
          {"paths",
           {{"gemm", p.gemm},
            {"conv", std::string("im2col + gemm ") + p.gemm},
            {"conv_depthwise", p.conv_depthwise},
            {"bf16", p.bf16},
            {"gemm_bf16", p.gemm_bf16},
            {"elementwise", p.elementwise}}}};
}

json report() {
  const bench::MachineInfo m = bench::machine_info();
  json j;
  j["schema"] = "kiln-info/1";
  j["kiln"] = {{"version", kiln::version()},
               {"compiler", compiler()},
               {"cxx_standard", long(__cplusplus)},
               {"build_type", kiln::build_info().build_type},
               {"build_options", build_options()}};
  j["host"] = m.hostname;
  j["cpu"] = cpu();
  j["threads"] = num_threads();
  j["backend_preference"] = backend_preference();
  json libs = cuda_libraries();
  libs["onednn"] = onednn();
  libs["mpi"] = mpi();
  libs["openmp"] = openmp();
  j["libraries"] = libs;
  j["gpus"] = gpus();
  json ops = json::object();
  for (const OpTableBase* op : registry().ops()) ops[op->name()] = op->candidates();
  j["ops"] = ops;
  json units = json::array();
  for (const BackendUnit& u : backend_units()) {
    json offered = json::array();
    for (const OpTableBase* op : registry().ops())
      if (op->has(u.name, u.device)) offered.push_back(op->name());
    units.push_back({{"name", u.name},
                     {"device", device_type_name(u.device)},
                     {"default_priority", u.default_priority},
                     {"summary", u.summary},
                     {"ops", offered}});
  }
  j["backends"] = units;
  json zoo = json::array();
  for (const auto& n : nets::zoo())
    zoo.push_back({{"name", n.name},
                   {"input", n.input},
                   {"parameters", n.parameters},
                   {"batch", bench::default_batch(n.name)}});
  j["models"] = zoo;
  return j;
}

// "2.6.3" or "not built"; `key` names the loaded version field.
std::string lib_text(const json& l, const char* key = "version") {
  if (!l.value("built", false)) return "not built";
  std::string s = l.value(key, std::string());
  const std::string compiled = l.value("compiled", std::string());
  if (s.empty()) s = "not loaded";
  if (!compiled.empty() && compiled != s) s += " (compiled " + compiled + ")";
  return s;
}

void print_text(const json& j) {
  const json& k = j["kiln"];
  std::printf("kiln %s\n", k["version"].get<std::string>().c_str());
  std::printf("build: %s, %s, C++ %ld\n", k["build_type"].get<std::string>().c_str(),
              k["compiler"].get<std::string>().c_str(), k["cxx_standard"].get<long>());
  std::string opts;
  for (const auto& [name, on] : k["build_options"].items()) opts += " " + name + "=" + (on.get<bool>() ? "ON" : "OFF");
  std::printf("options:%s\n", opts.empty() ? " (unknown)" : opts.c_str());
  const json& c = j["cpu"];
  std::printf("host: %s, %s, %d hardware threads\n", j["host"].get<std::string>().c_str(),
              c["model"].get<std::string>().c_str(), c["hardware_threads"].get<int>());
  std::string isa;
  for (const auto& [name, on] : c["isa"].items())
    if (on.get<bool>()) isa += " " + name;
  if (c["sve_bits"].get<int>() > 0) isa += " (" + std::to_string(c["sve_bits"].get<int>()) + "-bit SVE)";
  std::printf("isa (%s):%s; kiln uses: %s\n", c["arch"].get<std::string>().c_str(),
              isa.empty() ? " none of those kiln looks for" : isa.c_str(), c["kernels"].get<std::string>().c_str());
  const json& p = c["paths"];
  std::printf("native kernels (KILN_CPU_ISA=%s): gemm %s, conv %s, conv depthwise %s, bfloat16 %s, "
              "bfloat16 gemm %s, elementwise/norm/pool/optimizers %s\n",
              c["isa_cap"].get<std::string>().c_str(), p["gemm"].get<std::string>().c_str(),
              p["conv"].get<std::string>().c_str(), p["conv_depthwise"].get<std::string>().c_str(),
              p["bf16"].get<std::string>().c_str(), p["gemm_bf16"].get<std::string>().c_str(),
              p["elementwise"].get<std::string>().c_str());
  std::printf("threads: %d\n", j["threads"].get<int>());
  std::printf("backend preference: %s\n", j["backend_preference"].get<std::string>().c_str());
  const json& l = j["libraries"];
  std::printf("oneDNN: %s\n", lib_text(l["onednn"]).c_str());
  if (l["openmp"].value("built", false))
    std::printf("OpenMP: %s (_OPENMP %d)\n", l["openmp"]["spec"].get<std::string>().c_str(),
                l["openmp"]["version"].get<int>());
  else
    std::printf("OpenMP: not built\n");
  if (l["mpi"].value("built", false))
    std::printf("MPI: %s (standard %s)\n", l["mpi"]["library"].get<std::string>().c_str(),
                l["mpi"]["standard"].get<std::string>().c_str());
  else
    std::printf("MPI: not built\n");
  const json& cu = l["cuda"];
  if (cu.value("emulated", false)) {
    std::printf("cuda: emulated devices (build option KILN_EMU_DEVICE, kernels/cuda/emu): kiln's own kernels "
                "run on the host with a stream sanitizer; no GPU, no cuBLAS, cuDNN or NCCL\n");
  } else if (cu.value("built", false)) {
    const std::string driver = cu["driver"].get<std::string>();
    const std::string archs = cu["archs"].get<std::string>();
    std::printf("cuda: runtime %s, driver %s, cuBLAS %s, cuDNN %s, NCCL %s, archs built: %s\n",
                lib_text(cu, "runtime").c_str(), driver.empty() ? "none" : driver.c_str(),
                lib_text(l["cublas"]).c_str(), lib_text(l["cudnn"]).c_str(), lib_text(l["nccl"]).c_str(),
                archs.empty() ? "none (host code only)" : archs.c_str());
  } else {
    std::printf("cuda: not built\n");
  }
  const json& g = j["gpus"];
  if (g["count"].get<int>() == 0) {
    std::printf("gpu: none (no CUDA device: %s)\n", g["reason"].get<std::string>().c_str());
  } else {
    std::printf("gpus: %d\n", g["count"].get<int>());
    for (const json& d : g["devices"]) {
      if (d.contains("error")) {
        std::printf("  cuda:%d  %s\n", d["index"].get<int>(), d["error"].get<std::string>().c_str());
        continue;
      }
      std::printf("  cuda:%d  %s, %.1f GiB, compute capability %s, %d SMs\n", d["index"].get<int>(),
                  d["name"].get<std::string>().c_str(), double(d["memory_bytes"].get<size_t>()) / double(1u << 30),
                  d["compute_capability"].get<std::string>().c_str(), d["sm_count"].get<int>());
    }
  }
  std::printf("backends (registration order):\n");
  for (const json& u : j["backends"])
    std::printf("  %-7s %-5s %2zu ops  %s\n", u["name"].get<std::string>().c_str(), u["device"].get<std::string>().c_str(),
                u["ops"].size(), u["summary"].get<std::string>().c_str());
  std::printf("ops:\n");
  for (const auto& [name, cands] : j["ops"].items()) {
    std::string s;
    for (const auto& c2 : cands) s += (s.empty() ? "" : ", ") + c2.get<std::string>();
    std::printf("  %-24s %s\n", name.c_str(), s.c_str());
  }
  std::printf("zoo:\n");
  for (const auto& n : nets::zoo()) {
    std::string shape;
    for (int64_t d : n.input) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    const std::string about = n.description.size() > 70 ? n.description.substr(0, 67) + "..." : n.description;
    std::printf("  %-12s %-10s %12lld params  batch %-4lld %s\n", n.name.c_str(), shape.c_str(),
                static_cast<long long>(n.parameters), static_cast<long long>(bench::default_batch(n.name)),
                about.c_str());
  }
  // One line with every name, for scripts (tools/dev greps it).
  std::printf("models:");
  for (const auto& n : nets::zoo()) std::printf(" %s", n.name.c_str());
  std::printf("\n");
}

}  // namespace

Command add_info(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "version, build, libraries, CPU ISA, GPUs, registered kernels, models");
  auto as_json = std::make_shared<bool>(false);
  sub->add_flag("--json", *as_json, "print one JSON object (schema kiln-info/1, README: kiln info --json)");
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--backends-markdown", *markdown,
                "print the op x backend table of docs/backends/ops.md (from engine/backends/backends.inc)");
  return Command{sub, [as_json, markdown] {
                   if (*markdown) {
                     std::printf("%s", backends_markdown().c_str());
                     return 0;
                   }
                   const json j = report();
                   if (*as_json)
                     std::printf("%s\n", j.dump(2).c_str());
                   else
                     print_text(j);
                   return 0;
                 }};
}

}  // namespace kiln::cli
