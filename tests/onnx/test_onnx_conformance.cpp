// The ONNX backend node tests for every op type kiln's importer maps, rebuilt by the onnx
// package's own generators (tests/onnx/conformance.py, in the venv of tools/install-deps.sh
// --test), plus the same ops at older opsets with onnxruntime's outputs (conformance.py's legacy
// cases). Each case imports and matches the expected output within the case's tolerances
// (onnx.backend.test.runner's rtol 1e-3, atol 1e-7 unless the case sets its own), or is refused
// at import with a kiln::Error. A case that imports and then fails at run time or differs fails
// the test. Prints per op: passed, refused (by cause), failed.
// The cases that pass are exactly those of tests/onnx/conformance_pass.txt (README.md and
// docs/onnx.md quote its count): a case that stops passing fails, and so does one that starts
// to (add it to the list, with the counts in the docs: KILN_ONNX_PASS_LIST=<file> writes the list).
// Skipped without the venv's onnx, numpy and onnxruntime; fails without them under CI=true.
//   ctest --test-dir build -R onnx.test_onnx_conformance --output-on-failure
//   KILN_ONNX_CASES=test_resize build/tests/kiln_tests_onnx -sf='*conformance*'   (cases whose name has it)
#include "tests/support/testing.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/autograd.h"
#include "io/onnx/onnx.h"
#include "tests/e2e/onnx_testing.h"

using namespace kiln;

namespace {

struct Case {
  std::string name, op;
  int64_t opset = 0;
  double rtol = 1e-3, atol = 1e-7;
  std::string in_type, out_type;
  Shape in_shape, out_shape;
};

Shape parse_dims(const std::string& s) {
  Shape d;
  if (s == "-") return d;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) d.push_back(std::stoll(part));
  return d;
}

std::vector<Case> read_manifest(const std::string& path, int64_t* newest_opset) {
  std::ifstream in(path);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("newest opset ");
    if (line[0] == '#' && at != std::string::npos) *newest_opset = std::stoll(line.substr(at + 13));
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string part;
    while (std::getline(ss, part, '\t')) f.push_back(part);
    REQUIRE_MESSAGE(f.size() == 9, (std::string("manifest line: ") + line));
    Case c;
    c.name = f[0], c.op = f[1], c.opset = std::stoll(f[2]), c.rtol = std::stod(f[3]), c.atol = std::stod(f[4]);
    c.in_type = f[5], c.in_shape = parse_dims(f[6]), c.out_type = f[7], c.out_shape = parse_dims(f[8]);
    cases.push_back(c);
  }
  return cases;
}

// The refusal's cause: the message without "onnx import: node 'x' (Op, opset N): " and the
// source location, so that the same cause in several cases counts once.
std::string cause_of(const std::string& msg, const std::string& case_dir) {
  std::string m = msg;
  for (size_t at; (at = m.find(case_dir)) != std::string::npos;) m.replace(at, case_dir.size(), "<case>");
  const size_t at = m.find("): ");
  if (m.rfind("onnx import: node", 0) == 0 && at != std::string::npos) m = m.substr(at + 3);
  if (m.size() > 110) m = m.substr(0, 107) + "...";
  return m;
}

struct Tally {
  int pass = 0, fail = 0;
  std::map<std::string, int> refused;
  std::vector<std::string> failures;
};

}  // namespace

TEST_CASE("onnx conformance: the backend node tests of every mapped op pass or are refused at import") {
  if (!test::need_python("onnx, numpy, onnxruntime")) return;
  const auto t0 = std::chrono::steady_clock::now();
  test::TempDir dir("onnx_conformance");
  int rc = 0;
  const std::string cmd = test::shell_quote(test::python()) + " '" KILN_SOURCE_DIR
                          "/tests/onnx/conformance.py' generate " + test::shell_quote(dir.path.string()) + " 2>&1";
  const std::string said = test::run_capture(cmd, &rc);
  REQUIRE_MESSAGE(rc == 0, std::string(cmd + "\n" + said));
  MESSAGE(said);
  int64_t newest = 0;
  std::vector<Case> cases = read_manifest(dir / "manifest.tsv", &newest);
  REQUIRE(cases.size() > 200);
  // The importer's schema table (io/onnx/onnx_import.cpp) is onnx 1.23's: an onnx that knows a
  // newer opset needs the table reviewed (its models are refused until then, not misread).
  const std::string opsets = "the venv's onnx knows opsets up to " + std::to_string(newest) +
                             ", kiln's importer up to " + std::to_string(onnx::kNewestOpset) +
                             ": review schemas() in io/onnx/onnx_import.cpp";
  CHECK_MESSAGE(newest == onnx::kNewestOpset, opsets);
  const char* only = std::getenv("KILN_ONNX_CASES");
  std::map<std::string, Tally> per_op;
  std::set<std::string> passed;
  for (const Case& c : cases) {
    if (only && c.name.find(only) == std::string::npos) continue;
    Tally& t = per_op[c.op];
    const std::string cdir = dir / c.name;
    ModulePtr net;
    try {
      net = onnx::import_model(onnx::load(cdir + "/model.onnx"));
    } catch (const Error& e) {
      ++t.refused[cause_of(e.message(), cdir)];
      continue;
    }
    // Imported: it must run and match.
    auto fail = [&](const std::string& why) {
      ++t.fail;
      t.failures.push_back(c.name + " (opset " + std::to_string(c.opset) + "): " + why);
    };
    if (c.in_type != "float32" || c.out_type != "float32") {
      fail("imported although its input is " + c.in_type + " and its output " + c.out_type);
      continue;
    }
    const std::vector<float> x = onnx_test::read_floats(cdir + "/input.bin");
    const std::vector<float> want = onnx_test::read_floats(cdir + "/expected.bin");
    std::vector<float> got;
    Shape got_shape;
    try {
      net->eval();
      NoGradGuard g;
      const Tensor y = (*net)(from_vector(x, c.in_shape)).contiguous();
      got_shape = y.sizes();
      got = y.to_vector_of<float>();
    } catch (const Error& e) {
      fail("imported, then failed at run time: " + e.message());
      continue;
    }
    if (got_shape != c.out_shape) {
      fail("output shape " + shape_str(got_shape) + ", expected " + shape_str(c.out_shape));
      continue;
    }
    const int64_t bad = test::first_mismatch(test::as_doubles(got), test::as_doubles(want), c.rtol, c.atol);
    if (bad >= 0) {
      std::ostringstream os;
      os << "element " << bad << " is " << got[size_t(bad)] << ", expected " << want[size_t(bad)] << " (rtol "
         << c.rtol << ", atol " << c.atol << ")";
      fail(os.str());
      continue;
    }
    ++t.pass;
    passed.insert(c.name);
  }
  // The table.
  int pass = 0, refused = 0, failed = 0;
  std::ostringstream table;
  table << "op                  pass  refused  fail\n";
  for (const auto& [op, t] : per_op) {
    int r = 0;
    for (const auto& [cause, n] : t.refused) r += n;
    pass += t.pass, refused += r, failed += t.fail;
    char line[128];
    std::snprintf(line, sizeof line, "%-18s %5d %8d %5d\n", op.c_str(), t.pass, r, t.fail);
    table << line;
    for (const auto& [cause, n] : t.refused) table << "    refused " << n << ": " << cause << "\n";
    for (const std::string& f : t.failures) table << "    FAILED: " << f << "\n";
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  table << "total: " << pass << " passed, " << refused << " refused, " << failed << " failed, of "
        << (pass + refused + failed) << " cases (" << s << " s)\n";
  std::printf("%s", table.str().c_str());
  std::fflush(stdout);
  CHECK_MESSAGE(failed == 0,
                std::string(std::to_string(failed) + " case(s) imported and gave a wrong result or failed; see above"));
  if (const char* list = std::getenv("KILN_ONNX_PASS_LIST")) {
    std::ofstream out(list);
    for (const std::string& n : passed) out << n << "\n";
  }
  if (only) return;
  // Exactly the listed cases pass.
  std::set<std::string> expected;
  std::ifstream in(KILN_SOURCE_DIR "/tests/onnx/conformance_pass.txt");
  REQUIRE_MESSAGE(in, "tests/onnx/conformance_pass.txt is missing");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') expected.insert(line);
  for (const std::string& n : expected)
    CHECK_MESSAGE(passed.count(n), n << " passed before and does not now");
  for (const std::string& n : passed)
    CHECK_MESSAGE(expected.count(n), n << " passes and is not in tests/onnx/conformance_pass.txt (add it; update the counts in README.md and docs/onnx.md)");
  CHECK(pass == int(expected.size()));
  // The docs quote the count.
  std::ifstream readme(KILN_SOURCE_DIR "/README.md");
  std::stringstream text;
  text << readme.rdbuf();
  const std::string claim = std::to_string(expected.size()) + " pass, " + std::to_string(refused) + " refused";
  CHECK_MESSAGE(text.str().find(claim) != std::string::npos, "README.md does not say '" << claim << "'");
}
