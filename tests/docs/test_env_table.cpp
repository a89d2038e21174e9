// docs/environment.md against the code: every KILN_* variable the sources read must have a row,
// and every row must name a variable something reads. Matches by name only (files move; the
// "where read" column is for readers). Needs only the source tree, not the library: its own
// executable (tests/CMakeLists.txt), so a library that does not build yet cannot hide a stale
// table.
//   ctest --test-dir build -R docs.test_env_table
//
// What counts as a read:
//   C++ (engine kernels layers io dist nets train bench tools include examples tests):
//     getenv("KILN_X") / secure_getenv("KILN_X"); helper("KILN_X") where the scanned tree defines
//     helper(const char* p) { ... getenv(p) ... } within a few lines (cudnn's env_flag, dist's env);
//     a range-for over a braced list of names whose loop variable goes to getenv (or a helper)
//     within a few lines (KILN_NUM_THREADS, OMP_NUM_THREADS).
//     Any other "KILN_X" string literal in C++ fails the test unless the table has it or an
//     exclusion rule below covers it, so a read written some other way cannot slip past.
//   Scripts (tools/, deploy/, bench/*.sh, tests/support/): $KILN_X, ${KILN_X...}, $KILN, and
//     getenv("KILN_X") (Lua); CMake files: ENV{KILN_X}.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// name -> the files (relative to the source tree) that read it
using Reads = std::map<std::string, std::set<std::string>>;

// Exclusion rules for C++ string literals that name no environment variable:
// - KILN_WITH_* and KILN_HAVE_*: CMake options and compile definitions, named as strings by
//   `kiln info` (build_options) and by the tests that check them; the README's build section
//   documents them.
// - KILN_TEST_*: what the build defines for the tests themselves (KILN_TEST_PYTHON).
bool excluded_literal(const std::string& name) {
  for (const char* prefix : {"KILN_WITH_", "KILN_HAVE_", "KILN_TEST_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

bool is_env_call(const std::string& callee, const std::set<std::string>& helpers) {
  return callee == "getenv" || callee == "secure_getenv" || helpers.count(callee) > 0;
}

// Functions defined as name(const char* p[, more]) { ... getenv(p) ... }: the env helpers of one
// file, or of kernels/common/env.cpp (env_choice, env_flag, env_int take the allowed values too).
void find_helpers(const std::string& text, std::set<std::string>& helpers) {
  static const std::regex def(R"(\b(\w+)\s*\(\s*const\s+char\s*\*\s*(\w+)\s*[,)][^{;]*\{)");
  const std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, def)) continue;
    const std::regex use("getenv\\s*\\(\\s*" + m[2].str() + "\\s*\\)");
    for (size_t j = i; j < std::min(lines.size(), i + 4); ++j)
      if (std::regex_search(lines[j], use)) helpers.insert(m[1].str());
  }
}

// Every full "KILN_X" literal of one line, in order.
std::vector<std::string> kiln_literals(const std::string& line) {
  static const std::regex lit("\"(KILN_[A-Z0-9_]+)\"");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), lit); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

// The C++ reads of one file, and its KILN_X literals that are not reads.
void scan_cpp(const std::string& text, const std::string& path, const std::set<std::string>& helpers, Reads& reads,
              Reads& other_literals) {
  static const std::regex call("\\b(\\w+)\\s*\\(\\s*\"(KILN_[A-Z0-9_]+)\"");
  static const std::regex range_for(R"(for\s*\(\s*(?:const\s+)?[\w:]+\s*[\*&]?\s*(\w+)\s*:\s*\{([^{}]*)\}\s*\))");
  const std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::set<std::string> read_here;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), call); it != std::sregex_iterator(); ++it)
      if (is_env_call((*it)[1].str(), helpers)) read_here.insert((*it)[2].str());
    std::smatch m;
    if (std::regex_search(line, m, range_for)) {
      const std::string var = m[1].str();
      const std::regex use("\\b(\\w+)\\s*\\(\\s*" + var + "\\s*\\)");
      bool goes_to_getenv = false;
      for (size_t j = i; j < std::min(lines.size(), i + 4) && !goes_to_getenv; ++j)
        for (auto it = std::sregex_iterator(lines[j].begin(), lines[j].end(), use); it != std::sregex_iterator(); ++it)
          if (is_env_call((*it)[1].str(), helpers)) goes_to_getenv = true;
      if (goes_to_getenv)
        for (const std::string& name : kiln_literals(m[2].str())) read_here.insert(name);
    }
    for (const std::string& name : kiln_literals(line)) {
      if (read_here.count(name)) reads[name].insert(path);
      else other_literals[name].insert(path);
    }
  }
}

// $KILN_X, ${KILN_X...}, $KILN and ${KILN...} of a shell script; getenv("KILN_X") (Lua). In CMake
// files only ENV{KILN_X}: their ${KILN_X} are CMake variables (options, test settings).
void scan_script(const std::string& text, const std::string& path, Reads& reads) {
  const bool cmake = fs::path(path).filename() == "CMakeLists.txt" || fs::path(path).extension() == ".cmake";
  auto take = [&](size_t at) {
    size_t end = at;
    while (end < text.size() && ident_char(text[end])) ++end;
    const std::string name = text.substr(at, end - at);
    if (name == "KILN" || name.rfind("KILN_", 0) == 0) reads[name].insert(path);
  };
  for (size_t p = cmake ? std::string::npos : text.find('$'); p != std::string::npos; p = text.find('$', p + 1))
    take(p + 1 < text.size() && text[p + 1] == '{' ? p + 2 : p + 1);
  for (size_t p = text.find("ENV{"); p != std::string::npos; p = text.find("ENV{", p + 1)) take(p + 4);
  static const std::regex lua("getenv\\s*\\(\\s*\"(KILN_[A-Z0-9_]+)\"");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), lua); it != std::sregex_iterator(); ++it)
    reads[(*it)[1].str()].insert(path);
}

// The variables of the table under `heading` (up to the next "## "): first cells `KILN_X`.
// Duplicated rows are returned twice so that the caller can name them.
std::vector<std::string> table_rows(const std::string& md, const std::string& heading) {
  static const std::regex row(R"(^\|\s*`(KILN[A-Z0-9_]*)`\s*\|)");
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : split_lines(md)) {
    if (line.rfind("## ", 0) == 0) in = line == heading;
    std::smatch m;
    if (in && std::regex_search(line, m, row)) out.push_back(m[1].str());
  }
  return out;
}

std::string files_of(const std::set<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f;
  return s;
}

// One table against what the code reads: problems, one line each.
std::vector<std::string> compare(const std::vector<std::string>& rows, const Reads& reads, const std::string& table) {
  std::vector<std::string> problems;
  std::set<std::string> documented;
  for (const std::string& r : rows)
    if (!documented.insert(r).second) problems.push_back(r + ": two rows in " + table);
  for (const auto& [name, files] : reads)
    if (!documented.count(name))
      problems.push_back(name + " (read in " + files_of(files) + ") has no row in " + table + " of docs/environment.md");
  for (const std::string& r : documented)
    if (!reads.count(r)) problems.push_back(r + ": a row in " + table + " of docs/environment.md, but nothing reads it");
  return problems;
}

// Literals neither read, documented nor excluded: an env read the scanner does not recognise, or
// a name that wants an exclusion rule.
std::vector<std::string> unclassified(const Reads& other_literals, const std::set<std::string>& documented) {
  std::vector<std::string> problems;
  for (const auto& [name, files] : other_literals)
    if (!documented.count(name) && !excluded_literal(name))
      problems.push_back(name + " (string literal in " + files_of(files) +
                         ") is not a recognised environment read, not in docs/environment.md and not excluded");
  return problems;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool has_ext(const fs::path& p, std::initializer_list<const char*> exts) {
  const std::string e = p.extension().string();
  for (const char* x : exts)
    if (e == x) return true;
  return false;
}

struct Tree {
  std::map<std::string, std::string> cpp, scripts;  // relative path -> text
};

// The files of the source tree the check reads; build directories and the venv are not in the
// listed folders.
Tree load_tree(const fs::path& root) {
  Tree t;
  const std::string self = "tests/docs/test_env_table.cpp";  // its own literals are the rules above
  for (const char* dir : {"engine", "kernels", "layers", "io", "dist", "nets", "train", "bench", "tools", "include",
                          "examples", "tests", "deploy", "cmake"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file() || e.file_size() > 2'000'000) continue;
      const fs::path& p = e.path();
      const std::string rel = fs::relative(p, root).generic_string();
      const std::string top = rel.substr(0, rel.find('/'));
      if (rel == self) continue;
      if (has_ext(p, {".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh", ".inc"})) {
        t.cpp[rel] = read_text(p);
      } else if (p.filename() == "CMakeLists.txt" || has_ext(p, {".cmake"})) {
        t.scripts[rel] = read_text(p);
      } else if (top == "tools" || top == "deploy" || (top == "bench" && has_ext(p, {".sh"})) ||
                 rel.rfind("tests/support/", 0) == 0) {
        if (has_ext(p, {".py", ".md", ".json", ".csv", ".txt", ".in"})) continue;
        std::string text = read_text(p);
        if (text.find('\0') == std::string::npos) t.scripts[rel] = std::move(text);
      }
    }
  }
  const fs::path top_cmake = root / "CMakeLists.txt";
  if (fs::exists(top_cmake)) t.scripts["CMakeLists.txt"] = read_text(top_cmake);
  return t;
}

struct Scan {
  Reads cpp_reads, script_reads, other_literals;
};

Scan scan(const Tree& t) {
  Scan s;
  std::set<std::string> helpers;
  for (const auto& [path, text] : t.cpp) find_helpers(text, helpers);
  for (const auto& [path, text] : t.cpp) scan_cpp(text, path, helpers, s.cpp_reads, s.other_literals);
  for (const auto& [path, text] : t.scripts) scan_script(text, path, s.script_reads);
  // A variable the C++ reads belongs to the first table even where a script reads it too.
  for (const auto& [name, files] : s.cpp_reads) s.script_reads.erase(name);
  return s;
}

const char* kCppHeading = "## Read by the library, `kiln` and the tests";
const char* kScriptHeading = "## Read by the scripts";

std::vector<std::string> check(const Tree& t, const std::string& md) {
  const Scan s = scan(t);
  const std::vector<std::string> cpp_rows = table_rows(md, kCppHeading), script_rows = table_rows(md, kScriptHeading);
  std::vector<std::string> problems = compare(cpp_rows, s.cpp_reads, "the first table");
  for (std::string& p : compare(script_rows, s.script_reads, "the scripts' table")) problems.push_back(std::move(p));
  for (std::string& p : unclassified(s.other_literals, std::set<std::string>(cpp_rows.begin(), cpp_rows.end())))
    problems.push_back(std::move(p));
  return problems;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

}  // namespace

TEST_CASE("env table: the scanner finds each form of read, and the check names what disagrees") {
  Tree t;
  t.cpp["a/direct.cpp"] = "const char* v = std::getenv(\"KILN_ONE\");\n";
  t.cpp["a/helper.cpp"] =
      "bool flag(const char* name) {\n  const char* v = std::getenv(name);\n  return v;\n}\n"
      "static bool f = flag(\"KILN_TWO\");\n";
  t.cpp["a/loop.cpp"] =
      "for (const char* var : {\"KILN_THREE\", \"OMP_X\"}) {\n  if (const char* v = std::getenv(var)) {}\n}\n";
  t.cpp["a/info.cpp"] = "j[\"KILN_WITH_FOO\"] = true;\n";
  t.scripts["tools/run"] = "dir=${KILN_FOUR:-build}\nkiln=${KILN:-x}\necho $KILN_FIVE/x\n";
  t.scripts["CMakeLists.txt"] = "if(DEFINED ENV{KILN_SIX})\nset(x ${KILN_NOT_ENV})\n";  // a CMake variable
  const std::string good =
      std::string(kCppHeading) + "\n| `KILN_ONE` | | | |\n| `KILN_TWO` | | | |\n| `KILN_THREE` | | | |\n" +
      kScriptHeading + "\n| `KILN_FOUR` | | | |\n| `KILN` | | | |\n| `KILN_FIVE` | | | |\n| `KILN_SIX` | | | |\n";
  CHECK_MESSAGE(check(t, good).empty(), joined(check(t, good)));

  // A variable without a row, named with its file.
  std::string missing = good;
  missing.erase(missing.find("| `KILN_TWO`"), std::string("| `KILN_TWO` | | | |\n").size());
  std::vector<std::string> p = check(t, missing);
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("KILN_TWO (read in a/helper.cpp)") == 0);

  // A row nothing reads; a row twice.
  p = check(t, good + "| `KILN_SEVEN` | | | |\n| `KILN_FOUR` | | | |\n");
  REQUIRE(p.size() == 2);
  CHECK(p[0] == "KILN_FOUR: two rows in the scripts' table");
  CHECK(p[1].find("KILN_SEVEN: a row") == 0);

  // A script variable in the first table fails both ways.
  const std::string six = "| `KILN_SIX` | | | |\n";
  std::string moved = good;
  moved.erase(moved.find(six), six.size());         // out of the scripts' table...
  moved.insert(moved.find(kScriptHeading), six);  // ...into the first
  CHECK(check(t, moved).size() == 2);

  // A read the scanner does not recognise still fails, as an unclassified literal.
  t.cpp["a/indirect.cpp"] = "const char* kVar = \"KILN_EIGHT\";\nconst char* v = std::getenv(kVar);\n";
  p = check(t, good);
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("KILN_EIGHT (string literal in a/indirect.cpp)") == 0);
}

TEST_CASE("env table: docs/environment.md lists exactly the KILN_* variables the code reads") {
  const fs::path root = KILN_SOURCE_DIR;
  const fs::path doc = root / "docs" / "environment.md";
  REQUIRE_MESSAGE(fs::exists(doc), doc.string());
  const Tree t = load_tree(root);
  // Not vacuous: the tree was found and has its sources and scripts.
  REQUIRE(t.cpp.size() > 100);
  REQUIRE(t.scripts.size() > 10);
  const Scan s = scan(t);
  const std::string md = read_text(doc);
  // kiln reads more than 15 variables from C++ and about a dozen in its scripts; far fewer means
  // the scanner stopped recognising reads, not that they went away.
  CHECK(s.cpp_reads.size() > 15);
  CHECK(s.script_reads.size() > 8);
  CHECK(table_rows(md, kCppHeading).size() > 15);
  CHECK(table_rows(md, kScriptHeading).size() > 8);
  const std::vector<std::string> problems = check(t, md);
  CHECK_MESSAGE(problems.empty(), problems.size(), " disagreement(s):", joined(problems));
}
