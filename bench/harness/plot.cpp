// Charts of result files through gnuplot; see plot.h.
#include "bench/harness/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "engine/error.h"

extern char** environ;

namespace kiln::bench {
namespace {

bool executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct Series {
  std::string label;
  std::string model, backend, mode;
  std::map<int64_t, double> points;  // batch -> images/s
};

std::vector<Series> collect_series(const std::vector<NamedResults>& inputs) {
  using Key = std::tuple<std::string, std::string, std::string>;  // model, backend, mode
  auto key_of = [](const RunResult& r) { return Key{r.spec.model, r.spec.backend, r.spec.train ? "train" : "forward"}; };
  // A key with the same batch size in several files (two machines, say) gets one line per file,
  // labelled by file; otherwise the files' points join into one line.
  std::map<std::pair<Key, int64_t>, std::set<size_t>> files_of;
  for (size_t f = 0; f < inputs.size(); ++f)
    for (const RunResult& r : inputs[f].second.runs) files_of[{key_of(r), r.spec.batch}].insert(f);
  std::set<Key> split;
  for (const auto& [kb, files] : files_of)
    if (files.size() > 1) split.insert(kb.first);
  std::map<std::pair<Key, size_t>, Series> series;
  std::vector<std::pair<Key, size_t>> order;
  for (size_t f = 0; f < inputs.size(); ++f)
    for (const RunResult& r : inputs[f].second.runs) {
      const Key key = key_of(r);
      const bool per_file = split.count(key) > 0;
      const auto id = std::make_pair(key, per_file ? f : size_t(0));
      auto it = series.find(id);
      if (it == series.end()) {
        Series s;
        s.model = std::get<0>(key);
        s.backend = std::get<1>(key);
        s.mode = std::get<2>(key);
        // kiln's runs carry a kiln backend name (auto, native, ...); say whose it is.
        const bool foreign = s.backend.rfind("pytorch", 0) == 0;
        s.label = s.model + " " + (foreign ? s.backend : "kiln-" + s.backend) + " " + s.mode;
        if (per_file) s.label += " [" + basename_of(inputs[f].first) + "]";
        it = series.emplace(id, s).first;
        order.push_back(id);
      }
      it->second.points[r.spec.batch] = r.images_per_s;
    }
  std::vector<Series> out;
  for (const auto& id : order) out.push_back(series[id]);
  return out;
}

// A label as one tab-separated field of a data file. gnuplot reads a '"' there as the start of a
// quoted field and cuts the label at it, so it becomes "'"; it reads backslash escapes, so a
// backslash is doubled; tabs, newlines and other control characters become spaces. The text is
// data either way, never read as commands.
std::string data_field(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"') out += '\'';
    else if (c == '\\') out += "\\\\";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += ' ';
    else out += c;
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  KILN_CHECK(out.good(), "plot: cannot write ", path);
}

// Runs argv (argv[0] a path) with stdin from /dev/null and stdout and stderr into `log`; returns
// the wait status.
int run_gnuplot(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  KILN_CHECK(rc == 0, "plot: cannot run ", args[0], ": ", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    KILN_CHECK(errno == EINTR, "plot: waiting for ", args[0], " failed: ", std::strerror(errno));
  return status;
}

}  // namespace

std::string find_gnuplot() {
  if (const char* env = std::getenv("KILN_GNUPLOT")) {
    KILN_CHECK(executable(env), "KILN_GNUPLOT '", env, "' is not an executable file (unset it to use gnuplot from PATH)");
    return env;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && executable(dir + "/gnuplot")) return dir + "/gnuplot";
  return "";
}

std::string data_file_name(size_t i) { return "s" + std::to_string(i) + ".tsv"; }

GnuplotFiles gnuplot_files(const std::vector<NamedResults>& inputs) {
  const std::vector<Series> series = collect_series(inputs);
  KILN_CHECK(!series.empty(), "plot: the result files hold no runs");
  double lo = 0, hi = 0;
  for (const Series& s : series)
    for (const auto& [batch, ips] : s.points) {
      lo = lo == 0 ? ips : std::min(lo, ips);
      hi = std::max(hi, ips);
    }
  GnuplotFiles out;
  for (const Series& s : series) {
    std::ostringstream d;
    d.precision(17);
    d << "batch\t" << data_field(s.label) << "\n";
    for (const auto& [batch, ips] : s.points) d << batch << "\t" << ips << "\n";
    out.data.push_back(d.str());
  }
  // The script is built from numbers and fixed words only; the title, the data folder and the
  // output paths arrive as ARG1..ARG4 (gnuplot -c), string values gnuplot never parses as commands.
  std::ostringstream g;
  g << "# written by kiln plot: gnuplot -c plot.gp TITLE DATA_DIR PNG SVG\n"
    << "set datafile separator \"\\t\"\n"
    << "set title ARG1 noenhanced\n"
    << "set xlabel \"batch size\"\nset ylabel \"images/s\"\n"
    << "set logscale x 2\nset grid xtics ytics mxtics mytics\n"
    // Many lines: the legend goes under the chart in columns so the plot keeps its width.
    << (series.size() > 12 ? "set key below noenhanced\n" : "set key outside right top noenhanced\n")
    << "set offsets graph 0.05, graph 0.05, 0, 0\n";
  // A log scale once the lines span more than a decade (small and large nets together).
  if (lo > 0 && hi / lo > 20) g << "set logscale y\n";
  // One colour per (model, backend), solid lines for forward, dashed for train.
  std::map<std::string, int> colour;
  for (const Series& s : series) colour.emplace(s.model + "\n" + s.backend, int(colour.size()) + 1);
  std::ostringstream plot;
  plot << "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    // gnuplot cycles 8 colours; past them the point shape tells the lines apart.
    const int c = colour[s.model + "\n" + s.backend];
    plot << (i ? ", \\\n     " : "") << "ARG2.\"/" << data_file_name(i) << "\" using 1:2 with linespoints lw 2 pt "
         << (7 + 2 * ((c - 1) / 8) % 8) << " ps 0.9 lc " << c << " dt " << (s.mode == "train" ? 2 : 1)
         << " title columnheader(2)";
  }
  // Room under the chart for a legend below it (about three entries per row).
  const int height = series.size() > 12 ? 700 + 18 * int((series.size() + 2) / 3) : 700;
  g << "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
    << "  set terminal pngcairo size 1200," << height << " font \",11\" noenhanced\n"
    << "} else {\n"
    << "  set terminal png size 1200," << height << " noenhanced\n"
    << "}\n"
    << "set output ARG3\n"
    << plot.str() << "\n"
    << "set terminal svg size 1200," << height << " dynamic noenhanced\n"
    << "set output ARG4\n"
    << "replot\n"
    << "unset output\n";
  out.script = g.str();
  return out;
}

std::vector<std::string> plot_results(const std::vector<NamedResults>& inputs, std::string out_stem,
                                      const std::string& title) {
  for (const char* ext : {".png", ".svg"}) {
    const std::string e = ext;
    if (out_stem.size() > e.size() && out_stem.compare(out_stem.size() - e.size(), e.size(), e) == 0)
      out_stem.resize(out_stem.size() - e.size());
  }
  const std::string gnuplot = find_gnuplot();
  KILN_CHECK(!gnuplot.empty(),
             "kiln plot needs gnuplot, which is not installed (apt-get install gnuplot-nox, or "
             "tools/install-deps.sh --all; KILN_GNUPLOT names another executable)");
  const std::string png = out_stem + ".png", svg = out_stem + ".svg";
  const GnuplotFiles files = gnuplot_files(inputs);

  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/kiln-plot-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  KILN_CHECK(mkdtemp(name.data()) != nullptr, "plot: cannot create a temporary folder in ", tmpl, ": ",
             std::strerror(errno));
  const std::string dir = name.data();
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  write_text(dir + "/plot.gp", files.script);
  for (size_t i = 0; i < files.data.size(); ++i) write_text(dir + "/" + data_file_name(i), files.data[i]);
  const std::string log = dir + "/messages.txt";
  // No shell: gnuplot's path and every argument reach it as they are.
  const int status = run_gnuplot({gnuplot, "-c", dir + "/plot.gp",
                                  title.empty() ? "images/s against batch size" : title, dir, png, svg},
                                 log);
  std::string messages;
  {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    messages = ss.str();
  }
  KILN_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "plot: gnuplot failed (", gnuplot, "): ", messages);
  for (const std::string& f : {png, svg}) {
    struct stat st;
    KILN_CHECK(stat(f.c_str(), &st) == 0 && st.st_size > 0, "plot: gnuplot wrote no ", f, " (", messages, ")");
  }
  return {png, svg};
}

}  // namespace kiln::bench
