// Runs the PyTorch baseline script as a child process; see baseline.h.
#include "bench/harness/baseline.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "engine/allocator.h"
#include "engine/error.h"

namespace kiln::bench {
namespace {

constexpr const char* kScript = "pytorch_bench.py";

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
  CpuAllocator::instance().empty_cache();  // leave the memory to the PyTorch process
  const int status = std::system(cmd.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

const std::vector<BaselineVariant>& baseline_variants() {
  static const std::vector<BaselineVariant> v = {{"pytorch", false, false}, {"pytorch-cl", true, true}};
  return v;
}

std::string executable_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, size_t(n));
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string find_baseline_script(const std::string& exe_dir, const std::string& configured_source_dir) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KILN_SOURCE_DIR")) candidates.push_back(std::string(env) + "/bench/baselines");
  if (!exe_dir.empty()) {
    candidates.push_back(exe_dir + "/../../bench/baselines");  // build/tools/kiln in a build tree
    candidates.push_back(exe_dir + "/../share/kiln/baselines");  // an installed prefix
  }
  if (!configured_source_dir.empty()) candidates.push_back(configured_source_dir + "/bench/baselines");
  std::string tried;
  for (const std::string& dir : candidates) {
    const std::string path = dir + "/" + kScript;
    if (is_file(path)) return path;
    tried += "\n  " + path;
  }
  KILN_THROW("--vs-pytorch: cannot find ", kScript, "; set KILN_SOURCE_DIR to kiln's source tree. Tried:", tried);
}

std::string baseline_python() {
  const char* env = std::getenv("KILN_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

void check_pytorch(const std::string& python) {
  const int rc = run_shell(shell_quoted(python) + " -c 'import torch' >/dev/null 2>&1");
  KILN_CHECK(rc == 0, "--vs-pytorch: ", python,
             " cannot import torch. Install Debian's python3-torch with tools/install-deps.sh --baseline, or "
             "point KILN_PYTHON at a Python that has PyTorch");
}

Results run_pytorch_baseline(const std::string& python, const std::string& script, const std::vector<RunSpec>& specs,
                             const BaselineVariant& variant, int threads) {
  KILN_CHECK(!specs.empty(), "--vs-pytorch: nothing to run");
  std::string runs;
  for (const RunSpec& s : specs)
    runs += (runs.empty() ? "" : ",") + s.model + ":" + std::to_string(s.batch) + ":" + (s.train ? "train" : "forward");
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/kiln-pytorch-XXXXXX.json";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = mkstemps(name.data(), 5);
  KILN_CHECK(fd >= 0, "--vs-pytorch: cannot create a temporary file like ", tmpl);
  close(fd);
  const std::string out = name.data();

  std::string cmd;
  if (variant.tuned_malloc)
    cmd += "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 ";
  cmd += shell_quoted(python) + " " + shell_quoted(script) + " --runs " + shell_quoted(runs) +
         " --iters " + std::to_string(specs.front().iters) + " --warmup " + std::to_string(specs.front().warmup) +
         " --threads " + std::to_string(threads) + " --backend-name " + variant.backend +
         (variant.channels_last ? " --channels-last" : "") + " --device " + shell_quoted(specs.front().device) +
         (specs.front().dtype != "float32" ? " --amp " + specs.front().dtype : std::string()) + " --out " +
         shell_quoted(out) + " 1>&2";
  const int rc = run_shell(cmd);
  if (rc != 0) {
    std::remove(out.c_str());
    KILN_THROW("--vs-pytorch: the baseline script failed (exit ", rc, "): ", cmd);
  }
  Results res = read_results(out);
  std::remove(out.c_str());
  return res;
}

}  // namespace kiln::bench
