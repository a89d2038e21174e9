// docs/backends/ops.md against the registry: its generated table (kiln info --backends-markdown)
// must say, for every backend this build has, what the build registers. Columns of backends
// this build lacks are not checked (a CPU-only build cannot know cuDNN's column); the table has
// every op of engine/op_list.inc and every unit of engine/backends/backends.inc.
//   ctest --test-dir build -R backends_doc      Regenerate: build/tools/kiln info --backends-markdown
#include "tests/support/testing.h"

#include <fstream>
#include <sstream>

#include "engine/backends/backends.h"

using namespace kiln;

namespace {

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream ss(row);
  std::string c;
  std::getline(ss, c, '|');  // before the first bar
  while (std::getline(ss, c, '|')) {
    const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
  }
  if (!out.empty() && out.back().empty() && row.back() == '|') out.pop_back();
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("docs/backends/ops.md says what this build registers") {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/docs/backends/ops.md";
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t a = doc.find("<!-- generated: kiln info --backends-markdown -->");
  const size_t b = doc.find("<!-- end generated -->");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  const std::vector<std::string> want = lines(doc.substr(doc.find('\n', a) + 1, b - doc.find('\n', a) - 1));
  const std::vector<std::string> got = lines(backends_markdown());
  REQUIRE(got.size() == want.size());  // one row per op and the header: an op added or removed
  REQUIRE(got.size() > 40);
  CHECK(want[0] == got[0]);  // the units, in order
  const std::vector<std::string> header = cells(got[0]);
  size_t checked = 0;
  for (size_t r = 2; r < got.size(); ++r) {
    const std::vector<std::string> g = cells(got[r]);
    std::vector<std::string> w = cells(want[r]);
    REQUIRE(g.size() == header.size());
    REQUIRE(w.size() == header.size());
    CAPTURE(got[r]);
    CHECK(g[0] == w[0]);
    for (size_t c = 1; c < g.size(); ++c) {
      if (g[c] == "(not built)") continue;
#if !defined(__x86_64__)
      // The table is the x86-64 build's: elsewhere every oneDNN candidate ranks second
      // (engine/backends/cpu_onednn.cpp; its figures were measured on x86-64's JIT kernels).
      if (header[c] == "onednn/cpu" && w[c] == "first") w[c] = "second";
#endif
      INFO("column ", header[c], ": docs/backends/ops.md says '", w[c], "', the build registers '", g[c],
           "' (regenerate with kiln info --backends-markdown)");
      CHECK(g[c] == w[c]);
      ++checked;
    }
  }
  // At least ref and native on the CPU are always built.
  CHECK(checked >= 2 * (got.size() - 2));
}
