// Cross-rank settings check: a hash first, the full lists only when the hashes differ.
//   ctest --test-dir build -L mpi -R settings
#include "dist/settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "dist/wire.h"
#include "engine/error.h"

namespace kiln::dist {
namespace {

constexpr int64_t kMaxBytes = 64 * 1024;

// One "name\tvalue\n" line per setting; tabs and newlines inside become spaces.
std::string serialise(const Settings& s) {
  auto clean = [](std::string v) {
    std::replace_if(v.begin(), v.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return v;
  };
  std::string out;
  for (const Setting& x : s) out += clean(x.name) + "\t" + clean(x.value) + "\n";
  return out;
}

Settings parse(const std::string& text) {
  Settings s;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    s.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return s;
}

const std::string* find(const Settings& s, const std::string& name) {
  for (const Setting& x : s)
    if (x.name == name) return &x.value;
  return nullptr;
}

}  // namespace

std::string setting_number(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string settings_differences(const std::vector<Settings>& ranks) {
  if (ranks.empty()) return "";
  std::vector<std::string> names;
  for (const Settings& r : ranks)
    for (const Setting& x : r)
      if (std::find(names.begin(), names.end(), x.name) == names.end()) names.push_back(x.name);
  std::string out;
  for (const std::string& name : names) {
    const std::string* v0 = find(ranks[0], name);
    const std::string shown0 = v0 ? *v0 : "(none)";
    std::string line;
    for (size_t r = 1; r < ranks.size(); ++r) {
      const std::string* v = find(ranks[r], name);
      if (v && v0 && *v == *v0) continue;
      if (!v && !v0) continue;
      line += ", rank " + std::to_string(r) + " has " + (v ? *v : "(none)");
    }
    if (!line.empty()) out += "  " + name + ": rank 0 has " + shown0 + line + "\n";
  }
  return out;
}

void check_settings(Communicator& comm, const Settings& mine) {
  const int n = comm.size();
  if (n <= 1) return;
  const std::string text = serialise(mine);
  KILN_CHECK(int64_t(text.size()) <= kMaxBytes, "check_settings: rank ", comm.rank(), "'s settings take ",
             text.size(), " bytes, more than ", kMaxBytes);
  Tensor local = zeros({2}, DType::int64);
  local.data<int64_t>()[0] = int64_t(fnv1a(text));
  local.data<int64_t>()[1] = int64_t(text.size());
  Tensor all = zeros({2 * int64_t(n)}, DType::int64);
  comm.allgather(local, all, "settings fingerprint");
  const int64_t* a = all.data<int64_t>();
  int64_t longest = 0;
  bool same = true;
  for (int r = 0; r < n; ++r) {
    same = same && a[2 * r] == a[0] && a[2 * r + 1] == a[1];
    longest = std::max(longest, a[2 * r + 1]);
  }
  if (same) return;
  // Someone differs: everyone's whole list to everyone, so every rank writes the same message.
  KILN_CHECK(longest <= kMaxBytes, "check_settings: a rank announces ", longest, " bytes of settings, more than ",
             kMaxBytes);
  const int64_t width = longest + 1;  // NUL-terminated
  Tensor texts = zeros({width * n}, DType::uint8);
  comm.allgather(bytes_tensor(text, size_t(width)), texts, "settings");
  std::vector<Settings> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(parse(tensor_string(texts, r * width, width)));
  const std::string diff = settings_differences(ranks);
  KILN_CHECK(diff.empty(), "the ranks' settings differ (every rank of a job must run with the same; README.md, "
             "\"Settings the ranks compare\"):\n", diff.substr(0, diff.size() - 1));
}

}  // namespace kiln::dist
