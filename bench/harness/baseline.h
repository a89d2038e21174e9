// `kiln bench --vs-pytorch`: runs bench/baselines/pytorch_bench.py for the same models, batches
// and modes as kiln, in two variants, and reads its JSON back (same format as kiln's --out):
//   "pytorch"     PyTorch as installed (NCHW, glibc malloc defaults);
//   "pytorch-cl"  PyTorch at its best here: channels-last and
//                 GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295
//                 (glibc stops unmapping the big activation buffers every iteration).
// Python: $KILN_PYTHON, else /usr/bin/python3 (Debian's python3-torch; tools/install-deps.sh
// --baseline). The script is looked for under $KILN_SOURCE_DIR, then relative to the kiln
// executable (build tree or share/kiln), then in the source tree kiln was configured from.
#pragma once

#include <string>
#include <vector>

#include "bench/harness/results.h"

namespace kiln::bench {

struct BaselineVariant {
  std::string backend;  // "pytorch", "pytorch-cl": the backend field of its runs
  bool channels_last = false;
  bool tuned_malloc = false;
};
const std::vector<BaselineVariant>& baseline_variants();

// Directory of the running executable ("" when /proc/self/exe is unreadable).
std::string executable_dir();
// Path of pytorch_bench.py; throws kiln::Error listing where it looked.
std::string find_baseline_script(const std::string& exe_dir, const std::string& configured_source_dir);
std::string baseline_python();
// Throws kiln::Error with the install hint when `python` cannot import torch.
void check_pytorch(const std::string& python);

// Runs the script once for all `specs` (their model, batch, mode, iters, warmup) with `threads`
// threads; its table goes to stderr. Returns its results (backend = variant.backend).
Results run_pytorch_baseline(const std::string& python, const std::string& script, const std::vector<RunSpec>& specs,
                             const BaselineVariant& variant, int threads);

}  // namespace kiln::bench
