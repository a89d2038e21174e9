// CSV training logs (header once, append checks the header, rows flushed) and the console
// progress bar (bar, counts, values, ETA; in-place on a terminal, every N% otherwise).
//   ctest --test-dir build -R io.test_logs
#include "tests/support/testing.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/logs/csv_log.h"
#include "io/logs/progress.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {
std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("CsvLog writes the header once, flushes each row and checks the header on append") {
  fs::path dir = fs::temp_directory_path() / ("kiln_csv_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string p = (dir / "log.csv").string();
  {
    CsvLog log(p, false);
    log.write(1, {{"loss", 2.5}, {"acc", 0.1}});
    // Flushed per row: readable before the log is closed.
    CHECK(slurp(p) == "step,loss,acc\n1,2.5,0.1\n");
    log.write(2, {{"loss", 1.0 / 3}, {"acc", 0.25}});
    CHECK_THROWS_KILN(log.write(3, {{"acc", 0.3}, {"loss", 1.0}}), "columns changed");
  }
  CHECK(slurp(p) == "step,loss,acc\n1,2.5,0.1\n2,0.3333333333333333,0.25\n");
  {
    CsvLog log(p, true);
    log.write(3, {{"loss", 0.125}, {"acc", 0.5}});
  }
  CHECK(slurp(p) == "step,loss,acc\n1,2.5,0.1\n2,0.3333333333333333,0.25\n3,0.125,0.5\n");
  {
    CsvLog log(p, true);
    CHECK_THROWS_KILN(log.write(4, {{"loss", 0.1}}), "its header is 'step,loss,acc' but this run logs 'step,loss'");
  }
  {
    CsvLog log(p, false);  // truncates
    log.write(0, {{"a,b", 1}});
  }
  CHECK(slurp(p) == "step,\"a,b\"\n0,1\n");
  {
    CsvLog log((dir / "new.csv").string(), true);  // append to a missing file starts it
    log.write(5, {{"x", -1.5}});
  }
  CHECK(slurp((dir / "new.csv").string()) == "step,x\n5,-1.5\n");
  CHECK_THROWS_KILN(CsvLog((dir / "no" / "such" / "dir.csv").string(), false), "cannot open");
  fs::remove_all(dir);
}

TEST_CASE("ProgressBar line shows label, bar, counts, values and ETA") {
  std::ostringstream os;
  ProgressBar bar("epoch 1/2", 400, os, false);
  CHECK(bar.line(100, {{"loss", 0.41234}, {"acc", 0.85}, {"img/s", 2510.4}}, 30.0) ==
        "epoch 1/2  [======>                 ]  100/400  loss 0.4123  acc 0.8500  img/s 2510  ETA 1m30s");
  CHECK(bar.line(0, {}, 0.0) == "epoch 1/2  [                        ]    0/400  ETA ?");
  CHECK(bar.line(400, {{"lr", 1e-4}}, 3725.0, true) ==
        "epoch 1/2  [========================]  400/400  lr 1.000e-04  in 1h02m");
  CHECK(format_eta(45) == "45s");
  CHECK(format_eta(130) == "2m10s");
  ProgressBar unknown("eval", 0, os, false);
  CHECK(unknown.line(7, {}, 1.0) == "eval  7/?  ETA ?");
}

TEST_CASE("ProgressBar prints a plain line every 10% when not on a terminal") {
  std::ostringstream os;
  ProgressBar bar("epoch 2/3", 200, os, false);
  for (int s = 1; s <= 200; ++s) bar.update(s, {{"loss", 1.0}});
  bar.finish({{"loss", 0.5}});
  std::string out = os.str();
  CHECK(out.find('\r') == std::string::npos);
  int lines = 0;
  for (char c : out) lines += c == '\n';
  CHECK(lines == 11);  // 10%, 20%, ..., 100%, and the final line
  CHECK(out.find("epoch 2/3  [==>                     ]   20/200  loss 1.0000  ETA ") != std::string::npos);
  CHECK(out.find("200/200  loss 0.5000  in ") != std::string::npos);
}

TEST_CASE("ProgressBar rewrites one line in place on a terminal") {
  std::ostringstream os;
  ProgressBar bar("e", 3, os, true);
  bar.update(1, {{"loss", 123456.0}});
  bar.update(3, {{"loss", 1.0}});  // the last step is drawn whatever the time since the last
  bar.finish({});
  std::string out = os.str();
  CHECK(out.rfind("\re  [========>               ]  1/3  loss 123456  ETA ", 0) == 0);
  CHECK(out.find("\re  [========================]  3/3  loss 1.0000  ETA 0s") != std::string::npos);
  CHECK(out.back() == '\n');
  int newlines = 0;
  for (char c : out) newlines += c == '\n';
  CHECK(newlines == 1);
}
