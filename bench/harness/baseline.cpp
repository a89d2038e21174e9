// Runs the peers of `kiln bench --vs-pytorch` as child processes; see baseline.h.
#include "bench/harness/baseline.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "engine/allocator.h"
#include "engine/error.h"
#include "io/onnx/onnx.h"
#include "nets/zoo.h"

namespace kiln::bench {
namespace {

constexpr const char* kTunedMalloc =
    "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 ";

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run_shell(const std::string& cmd) {
  CpuAllocator::instance().empty_cache();  // leave the memory to the peer's process
  const int status = std::system(cmd.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string temp_base() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir && *tmpdir ? tmpdir : "/tmp";
}

// A fresh temporary file name ending in .json (the file exists, empty).
std::string temp_json(const char* what) {
  std::string tmpl = temp_base() + "/kiln-" + what + "-XXXXXX.json";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = mkstemps(name.data(), 5);
  KILN_CHECK(fd >= 0, "--vs-pytorch: cannot create a temporary file like ", tmpl);
  close(fd);
  return name.data();
}

// Runs `cmd` (which writes `out`), reads the results and removes the file.
Results run_peer_command(const std::string& cmd, const std::string& out, const std::string& backend) {
  const int rc = run_shell(cmd);
  if (rc != 0) {
    std::remove(out.c_str());
    KILN_THROW("--vs-pytorch: the ", backend, " baseline script failed (exit ", rc, "): ", cmd);
  }
  Results res = read_results(out);
  std::remove(out.c_str());
  return res;
}

// Removes a directory of exported models and the files in it.
struct TempModels {
  std::string dir;
  std::vector<std::string> files;
  ~TempModels() {
    for (const std::string& f : files) std::remove(f.c_str());
    if (!dir.empty()) rmdir(dir.c_str());
  }
};

}  // namespace

std::string executable_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, size_t(n));
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string find_baseline_script(const std::string& exe_dir, const std::string& configured_source_dir,
                                 const std::string& name) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KILN_SOURCE_DIR")) candidates.push_back(std::string(env) + "/bench/baselines");
  if (!exe_dir.empty()) {
    candidates.push_back(exe_dir + "/../../bench/baselines");  // build/tools/kiln in a build tree
    candidates.push_back(exe_dir + "/../share/kiln/baselines");  // an installed prefix
  }
  if (!configured_source_dir.empty()) candidates.push_back(configured_source_dir + "/bench/baselines");
  std::string tried;
  for (const std::string& dir : candidates) {
    const std::string path = dir + "/" + name;
    if (is_file(path)) return path;
    tried += "\n  " + path;
  }
  KILN_THROW("--vs-pytorch: cannot find ", name, "; set KILN_SOURCE_DIR to kiln's source tree. Tried:", tried);
}

std::string baseline_venv(const std::string& configured_source_dir) {
  if (const char* env = std::getenv("KILN_VENV"); env && *env) return env;
  const char* src = std::getenv("KILN_SOURCE_DIR");
  return std::string(src && *src ? src : configured_source_dir) + "/.venv";
}

std::string baseline_python(const std::string& configured_source_dir) {
  const char* env = std::getenv("KILN_PYTHON");
  return env && *env ? env : baseline_venv(configured_source_dir) + "/bin/python";
}

std::string python_module_version(const std::string& python, const std::string& module) {
  if (!is_file(python)) return "";
  const std::string cmd = shell_quoted(python) + " -c " +
                          shell_quoted("import " + module + "; print(" + module + ".__version__)") + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

PeerPlan plan_peers(const std::string& venv_python, const std::string& venv, const std::string& debian_python) {
  PeerPlan plan;
  const std::string hint = "tools/install-deps.sh --baseline";
  const bool venv_there = is_file(venv_python);
  const std::string where = venv_python + (venv_there ? "" : " (not found)");
  const std::string torch = python_module_version(venv_python, "torch");
  if (!torch.empty()) {
    plan.peers.push_back(Peer{PeerKind::pytorch, "pytorch", venv_python, torch, false, false});
    plan.peers.push_back(Peer{PeerKind::pytorch, "pytorch-cl", venv_python, torch, true, true});
  } else {
    plan.notes.push_back("pytorch, pytorch-cl: PyTorch not installed in " + where + "; " + hint +
                         " (or KILN_PYTHON=<a python with torch>)");
  }
  if (debian_python != venv_python) {
    const std::string deb = python_module_version(debian_python, "torch");
    if (!deb.empty())
      plan.peers.push_back(Peer{PeerKind::pytorch, "pytorch-debian-cl", debian_python, deb, true, true});
    else
      plan.notes.push_back("pytorch-debian-cl: " + debian_python + " cannot import torch (Debian's python3-torch); " +
                           hint);
  }
  const std::string ort = python_module_version(venv_python, "onnxruntime");
  if (!ort.empty())
    plan.peers.push_back(Peer{PeerKind::onnxruntime, "onnxruntime", venv_python, ort, false, false});
  else
    plan.notes.push_back("onnxruntime: not installed in " + (venv_there ? venv : where) + "; " + hint);
  return plan;
}

Results run_pytorch_peer(const Peer& peer, const std::string& script, const std::vector<RunSpec>& specs, int threads) {
  std::string runs;
  const RunSpec* first = nullptr;
  for (const RunSpec& s : specs) {
    if (is_onnx_model(s.model)) continue;  // the PyTorch script builds zoo nets only
    if (!first) first = &s;
    runs += (runs.empty() ? "" : ",") + s.model + ":" + std::to_string(s.batch) + ":" + (s.train ? "train" : "forward");
  }
  if (!first) return Results{};
  const std::string out = temp_json("pytorch");
  std::string cmd = peer.tuned_malloc ? kTunedMalloc : "";
  cmd += shell_quoted(peer.python) + " " + shell_quoted(script) + " --runs " + shell_quoted(runs) + " --iters " +
         std::to_string(first->iters) + " --warmup " + std::to_string(first->warmup) + " --threads " +
         std::to_string(threads) + " --backend-name " + peer.backend + (peer.channels_last ? " --channels-last" : "") +
         " --device " + shell_quoted(first->device) +
         (first->dtype != "float32" ? " --amp " + first->dtype : std::string()) + " --out " + shell_quoted(out) +
         " 1>&2";
  return run_peer_command(cmd, out, peer.backend);
}

bool onnxruntime_runs(const RunSpec& spec) {
  return !spec.train && spec.dtype == "float32" && spec.device == "cpu";
}

Results run_onnxruntime_peer(const Peer& peer, const std::string& script, const std::vector<RunSpec>& specs,
                             int threads, std::vector<std::string>* notes) {
  TempModels models;
  std::string args;
  const RunSpec* first = nullptr;
  std::set<std::pair<std::string, int64_t>> done;
  for (const RunSpec& s : specs) {
    if (!onnxruntime_runs(s) || !done.insert({s.model, s.batch}).second) continue;
    std::string path = s.model;
    if (!is_onnx_model(s.model)) {
      if (models.dir.empty()) {
        std::string tmpl = temp_base() + "/kiln-onnx-XXXXXX";
        std::vector<char> name(tmpl.begin(), tmpl.end());
        name.push_back('\0');
        KILN_CHECK(mkdtemp(name.data()), "--vs-pytorch: cannot create a temporary directory like ", tmpl);
        models.dir = name.data();
      }
      path = models.dir + "/" + s.model + "-b" + std::to_string(s.batch) + ".onnx";
      try {
        const nets::NetInfo& info = net_of(s);
        ModulePtr net = info.build(nets::NetOptions{});
        Shape input = info.input;
        input.insert(input.begin(), s.batch);
        onnx::ExportOptions eo;
        eo.dynamic_batch = false;
        eo.graph_name = s.model;
        onnx::save(onnx::export_module(*net, input, eo), path);
        models.files.push_back(path);
      } catch (const Error& e) {
        if (notes) notes->push_back("onnxruntime: no row for " + s.model + " batch " + std::to_string(s.batch) +
                                    ": kiln cannot export it (" + e.what() + ")");
        continue;
      }
      CpuAllocator::instance().empty_cache();
    }
    if (!first) first = &s;
    args += " --run " + shell_quoted(path) + " " + shell_quoted(s.model) + " " + std::to_string(s.batch);
  }
  if (!first) return Results{};
  const std::string out = temp_json("onnxruntime");
  const std::string cmd = shell_quoted(peer.python) + " " + shell_quoted(script) + args + " --iters " +
                          std::to_string(first->iters) + " --warmup " + std::to_string(first->warmup) +
                          " --threads " + std::to_string(threads) + " --backend-name " + peer.backend + " --out " +
                          shell_quoted(out) + " 1>&2";
  return run_peer_command(cmd, out, peer.backend);
}

}  // namespace kiln::bench
