// `kiln bench --vs-pytorch`: the peers timed beside kiln, each a column of kiln/peer ratios, each
// writing the JSON of kiln's --out (read back here):
//   "pytorch"            PyTorch 2.x of the venv as installed (NCHW, glibc malloc defaults);
//   "pytorch-cl"         the same PyTorch at its best here: channels-last and
//                        GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295
//                        (glibc stops unmapping the big activation buffers every iteration);
//   "pytorch-debian-cl"  Debian's python3-torch (1.13, /usr/bin/python3) at its best, where present;
//   "onnxruntime"        forward float32 rows on the CPU only: onnxruntime (CPU execution provider,
//                        ORT_ENABLE_ALL, intra-op threads = kiln's) on kiln's own ONNX export of
//                        the same net (io/onnx, batch fixed to the timed one), exported to a
//                        temporary directory.
// bfloat16/float16 rows run the PyTorch columns under torch.autocast. Scripts:
// bench/baselines/pytorch_bench.py and onnxruntime_bench.py, looked for under $KILN_SOURCE_DIR,
// then relative to the kiln executable (build tree or share/kiln), then in the source tree kiln
// was configured from. The venv: $KILN_VENV, else <source>/.venv (tools/install-deps.sh
// --baseline makes it); $KILN_PYTHON replaces its python for the PyTorch 2.x columns. A peer
// that is not installed is a note naming what is missing and the install step, not an error.
//   build/tools/kiln bench --model alexnet --batch 2 --iters 2 --vs-pytorch
//   ctest --test-dir build -R "bench.test_baseline"
#pragma once

#include <string>
#include <vector>

#include "bench/harness/results.h"

namespace kiln::bench {

enum class PeerKind { pytorch, onnxruntime };

struct Peer {
  PeerKind kind = PeerKind::pytorch;
  std::string backend;      // the backend field of its runs and the column's name
  std::string python;       // interpreter that runs its script
  std::string version;      // torch.__version__ / onnxruntime.__version__
  bool channels_last = false;
  bool tuned_malloc = false;
};

struct PeerPlan {
  std::vector<Peer> peers;         // installed, in column order
  std::vector<std::string> notes;  // one line per peer left out, with the reason and the fix
};

// Directory of the running executable ("" when /proc/self/exe is unreadable).
std::string executable_dir();
// Path of bench/baselines/<name> ("pytorch_bench.py", "onnxruntime_bench.py"); throws
// kiln::Error listing where it looked.
std::string find_baseline_script(const std::string& exe_dir, const std::string& configured_source_dir,
                                 const std::string& name = "pytorch_bench.py");
// $KILN_VENV, else <source>/.venv with source = $KILN_SOURCE_DIR or `configured_source_dir`.
std::string baseline_venv(const std::string& configured_source_dir);
// $KILN_PYTHON, else baseline_venv()/bin/python.
std::string baseline_python(const std::string& configured_source_dir);
constexpr const char* kDebianPython = "/usr/bin/python3";
// `module`.__version__ as `python` imports it; "" when python is missing or the import fails.
std::string python_module_version(const std::string& python, const std::string& module);

// Which peers are installed: PyTorch in `venv_python` (two columns), PyTorch in `debian_python`
// (one, unless it is the same interpreter), onnxruntime in `venv_python`. `venv` names the venv in
// the notes.
PeerPlan plan_peers(const std::string& venv_python, const std::string& venv, const std::string& debian_python);

// Runs the PyTorch script once for the zoo rows of `specs` (their model, batch, mode, iters,
// warmup, dtype) with `threads` threads; its table goes to stderr. Returns its results
// (backend = peer.backend). Throws kiln::Error when the script fails.
Results run_pytorch_peer(const Peer& peer, const std::string& script, const std::vector<RunSpec>& specs, int threads);

// The forward float32 CPU rows of `specs`, each zoo net exported by kiln (an .onnx model taken as
// it is), timed by the onnxruntime script with `threads` intra-op threads. A net kiln cannot
// export is a line in *notes and no row. Throws kiln::Error when the script fails.
Results run_onnxruntime_peer(const Peer& peer, const std::string& script, const std::vector<RunSpec>& specs,
                             int threads, std::vector<std::string>* notes);

// Whether `spec` has an onnxruntime row (forward, float32, CPU).
bool onnxruntime_runs(const RunSpec& spec);

}  // namespace kiln::bench
