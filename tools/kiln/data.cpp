// `kiln data list|fetch|verify`: the data-set catalogue and the shared data directory
// (io/data/catalogue.h: KILN_DATA, default $HOME/.cache/kiln/data; KILN_CATALOGUE adds entries).
//   kiln data list
//   kiln data fetch fashion-mnist [--from URL|PATH] [--dir DIR]
//   kiln data verify cifar-10 [--dir DIR] [--full]
//   kiln data traffic --rows 8760 --seed 1 --out traffic.csv   (a synthetic hourly traffic series,
//     io/data/timeseries.h synthetic_traffic: for kiln train --data timeseries:traffic.csv)
// Test: ctest --test-dir build -R cli.data
#include <cstdio>
#include <memory>

#include "io/data/catalogue.h"
#include "io/data/timeseries.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

namespace {
struct DataArgs {
  std::string name, from, dir, out;
  bool full = false;
  int64_t rows = 24 * 7 * 52;
  uint64_t seed = 1;
};
}  // namespace

Command add_data(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("data", "data sets: list the catalogue, fetch, verify checksums");
  sub->require_subcommand(1);
  auto args = std::make_shared<DataArgs>();
  CLI::App* list = sub->add_subcommand("list", "the catalogue: name, size, installed?, licence");
  CLI::App* fetch = sub->add_subcommand("fetch", "download or copy a data set into the data directory");
  fetch->add_option("name", args->name, "data set name (kiln data list)")->required();
  fetch->add_option("--from", args->from, "a URL, file:// URL or path (a folder holding the files, or the one file)");
  fetch->add_option("--dir", args->dir, "destination folder (default: $KILN_DATA/NAME)");
  CLI::App* verify = sub->add_subcommand("verify", "check the size and md5/sha256 of every file of a data set");
  verify->add_option("name", args->name, "data set name")->required();
  verify->add_option("--dir", args->dir, "the data set's folder (default: where it is installed)");
  verify->add_flag("--full", args->full, "hash files over 4 GiB too (ImageNet's tars), not only their size");

  CLI::App* traffic = sub->add_subcommand("traffic", "write a synthetic hourly network-traffic series as CSV");
  traffic->add_option("--rows", args->rows, "hours")->capture_default_str()->check(CLI::Range(int64_t(8), int64_t(1) << 26));
  traffic->add_option("--seed", args->seed, "seed")->capture_default_str();
  traffic->add_option("--out", args->out, "the CSV file to write")->required();

  return Command{sub, [=] {
                   if (traffic->parsed()) {
                     write_csv_table(args->out, synthetic_traffic(args->rows, args->seed));
                     std::printf("%s: %lld hourly rows (bytes_in, bytes_out, flows), seed %llu\n", args->out.c_str(),
                                 (long long)args->rows, (unsigned long long)args->seed);
                     return 0;
                   }
                   if (list->parsed()) {
                     std::printf("data directory: %s (KILN_DATA)\n", data_root().c_str());
                     std::printf("%-20s %-8s %-10s %s\n", "NAME", "SIZE", "INSTALLED", "LICENCE");
                     for (const auto& d : catalogue()) {
                       const std::string where = find_dataset(d.name);
                       std::printf("%-20s %-8s %-10s %s\n", d.name.c_str(), d.size.c_str(),
                                   where.empty() ? "no" : "yes", d.licence.c_str());
                     }
                     for (const auto& d : catalogue()) {
                       const std::string where = find_dataset(d.name);
                       if (!where.empty()) std::printf("  %s: %s\n", d.name.c_str(), where.c_str());
                     }
                     return 0;
                   }
                   if (fetch->parsed()) {
                     FetchOptions opt;
                     opt.from = args->from;
                     opt.dir = args->dir;
                     opt.log = [&](const std::string& s) { std::printf("%s: %s\n", args->name.c_str(), s.c_str()); std::fflush(stdout); };
                     const std::string dir = fetch_dataset(args->name, opt);
                     const DatasetInfo d = catalogue_entry(args->name);
                     std::printf("%s: ready in %s\n", args->name.c_str(), dir.c_str());
                     if (!d.citation.empty()) std::printf("cite: %s\n", d.citation.c_str());
                     return 0;
                   }
                   int bad = 0;
                   for (const auto& c : verify_dataset(args->name, args->dir, args->full)) {
                     std::printf("%-32s %s  %s\n", c.file.c_str(), c.ok ? "OK  " : "FAIL", c.detail.c_str());
                     bad += !c.ok;
                   }
                   if (bad) std::fprintf(stderr, "kiln: %s: %d file(s) failed verification\n", args->name.c_str(), bad);
                   return bad ? 1 : 0;
                 }};
}

}  // namespace kiln::cli
