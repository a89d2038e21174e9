// The temp directory and the replay table of fuzz/fuzz_target.h.
#include "fuzz/fuzz_target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

namespace kiln::fuzz {

namespace {
std::map<std::string, TargetFn>& table() {
  static std::map<std::string, TargetFn> t;
  return t;
}

struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/kiln_fuzz_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      std::perror("kiln fuzz: mkdtemp");
      std::abort();
    }
    path = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

bool register_target(const char* name, TargetFn fn) {
  table()[name] = fn;
  return true;
}

TargetFn find_target(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

const std::string& temp_dir() {
  static TempDir dir;
  return dir.path;
}

std::string write_temp(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = temp_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(("kiln fuzz: writing " + path).c_str());
    std::abort();
  }
  return path;
}

}  // namespace kiln::fuzz
