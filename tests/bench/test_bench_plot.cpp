// `kiln plot` drawing through gnuplot: a PNG (its signature) and an SVG (with a line's title)
// from four runs. Skipped without gnuplot; fails without it under CI=true
// (tools/install-deps.sh --all installs it).
//   ctest --test-dir build -R bench.test_bench_plot
#include "tests/support/testing.h"
#include "tests/bench/bench_testing.h"

#include <fstream>
#include <sstream>

#include "bench/harness/plot.h"
#include "bench/harness/results.h"

using namespace kiln;
using namespace kiln::bench;
using kiln::test::synthetic;


TEST_CASE("plot writes a PNG and an SVG through gnuplot") {
  if (find_gnuplot().empty()) {
    test::skip_missing("gnuplot", "gnuplot not found (apt-get install gnuplot-nox, or tools/install-deps.sh --all)");
    return;
  }
  Results res;
  res.runs = {synthetic("mnist-cnn", 16, false, "native", 1000), synthetic("mnist-cnn", 64, false, "native", 1500),
              synthetic("mnist-cnn", 16, true, "native", 300), synthetic("mnist-cnn", 64, true, "pytorch", 400)};
  test::TempDir dir("bench_plot");
  const std::vector<std::string> files = plot_results({{"r.json", res}}, dir / "chart.png", "test");
  REQUIRE(files.size() == 2);
  CHECK(files[0] == dir / "chart.png");
  std::ifstream png(files[0], std::ios::binary);
  char sig[8] = {};
  png.read(sig, 8);
  CHECK(std::string(sig, 8) == "\x89PNG\r\n\x1a\n");
  std::ifstream svg(files[1]);
  std::stringstream ss;
  ss << svg.rdbuf();
  CHECK(ss.str().find("<svg") != std::string::npos);
  CHECK(ss.str().find("mnist-cnn kiln-native forward") != std::string::npos);
  CHECK(ss.str().find("mnist-cnn pytorch train") != std::string::npos);
}

// Issue 18: model and backend names, the title and the output path are data. Backquotes, $(...),
// newlines, quotes, gnuplot macros (@) and script words reach gnuplot, which must run none of
// them (a marker file must not appear) and still show each label in the SVG.
TEST_CASE("plot runs nothing a result file or a title holds") {
  if (find_gnuplot().empty()) {
    test::skip_missing("gnuplot", "gnuplot not found (apt-get install gnuplot-nox, or tools/install-deps.sh --all)");
    return;
  }
  test::TempDir dir("bench_plot_hostile");
  const std::string marker = dir / "pwned";
  const std::string touch = "touch " + marker;
  Results res;
  res.runs = {synthetic("m`" + touch + "`", 16, false, "native", 1000),
              synthetic("m$(" + touch + ")", 16, false, "native", 900),
              synthetic("m\"; system(\"" + touch + "\"); \"", 16, false, "native", 800),
              synthetic("m\nsystem \"" + touch + "\"\n", 16, false, "native", 700),
              synthetic("m @ARG1 \\", 16, false, "b`" + touch + "`", 600)};
  // The output name too (its folder must exist, so no '/' in it).
  const std::string out = dir / "chart`id` $(id) \"q\"";
  const std::vector<std::string> files = plot_results({{"r.json", res}}, out, "t`" + touch + "` \"x\n@ARG2");
  REQUIRE(files.size() == 2);
  CHECK(files[1] == out + ".svg");
  CHECK_FALSE(std::ifstream(marker).good());
  std::ifstream svg(files[1]);
  std::stringstream ss;
  ss << svg.rdbuf();
  const std::string text = ss.str();
  for (const std::string& label :
       {"m`" + touch + "` kiln-native forward", "m$(" + touch + ") kiln-native forward",
        "m'; system('" + touch + "'); ' kiln-native forward", "m system '" + touch + "'  kiln-native forward",
        "m @ARG1 \\ kiln-b`" + touch + "` forward"}) {
    const std::string shown = "label: " + label;
    MESSAGE(shown);
    CHECK(text.find(label) != std::string::npos);
  }
}
