// The flags of the commands that run a net (kiln train, kiln eval, kiln bench): where it runs
// (--device, --backend, --threads) and in what precision and layout (--dtype, --layout). Declared
// once, with one help text each, checked one way and applied one way: the backend preference and
// the thread count become the process's for the command (every thread it starts sees them), as
// KILN_BACKEND and KILN_NUM_THREADS would.
//   ctest --test-dir build -R cli.bad_args
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"

namespace kiln::cli {

struct RuntimeFlags {
  std::string device = "cpu";
  std::string backend = "auto";  // a preference list (engine/backend_preference.h)
  int threads = 0;               // 0: KILN_NUM_THREADS, OMP_NUM_THREADS or all cores
  std::string dtype = "float32";
  std::string layout;            // one of the command's layouts (add_runtime_flags)
};

// Adds --device, --backend and --threads to `sub`; with `layouts` (the command's --layout values,
// its default first) also --dtype and --layout.
void add_runtime_flags(CLI::App* sub, RuntimeFlags* f, const std::vector<std::string>& layouts = {});

// The device the flags name: "cuda" without an index under mpirun or srun is the GPU of this
// rank's local rank (modulo the devices present), as Horovod's and DDP's launch scripts do;
// "cuda:N" is taken as it is.
Device runtime_device(const RuntimeFlags& f);
// Its name for tables and logs: the flag as given ("cuda"), or with the index a local rank chose
// ("cuda:1").
std::string runtime_device_name(const RuntimeFlags& f);

// --dtype as a DType (float32, bfloat16 or float16).
DType runtime_dtype(const RuntimeFlags& f);

// Checks every flag (a device that is not there, an unknown backend, dtype or layout: kiln::Error
// naming the flag) and makes the thread count and the backend preference the process's.
void apply_runtime_flags(const RuntimeFlags& f, const std::vector<std::string>& layouts = {});

}  // namespace kiln::cli
