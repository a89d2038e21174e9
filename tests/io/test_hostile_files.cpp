// Issue 18, hostile files outside the format readers: checkpoint sidecars, the data catalogue and
// what `kiln data fetch` unpacks. Nothing a file holds is followed outside its place (catalogue
// names, archive members, links), every checksum listed is checked, JSON nesting is bounded, a
// FIFO where a file belongs is refused at once (a hang would fail the test by its timeout), and
// every error names the file, the key and the value.
//   ctest --test-dir build -R io.test_hostile_files
#include "tests/support/testing.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/data/catalogue.h"
#include "io/data/dataloader.h"
#include "io/data/synthetic.h"
#include "io/data/tar_members.h"
#include "io/formats/checkpoint.h"
#include "io/formats/digest.h"
#include "io/formats/json_limits.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string sha256(const std::string& s) { return io::digest_hex("sha256", s.data(), s.size()); }
std::string md5(const std::string& s) { return io::digest_hex("md5", s.data(), s.size()); }

// A ustar archive, written here so each hostile member can be planted exactly.
struct TarEntry {
  std::string name;
  char type = '0';
  std::string data, link;
};

std::string tar_of(const std::vector<TarEntry>& entries) {
  std::string out;
  for (const TarEntry& e : entries) {
    char h[512] = {};
    std::memcpy(h, e.name.data(), std::min<size_t>(e.name.size(), 100));
    std::snprintf(h + 100, 8, "%07o", e.type == '5' ? 0755 : 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", (unsigned long long)e.data.size());
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = e.type;
    std::memcpy(h + 157, e.link.data(), std::min<size_t>(e.link.size(), 100));
    std::memcpy(h + 257, "ustar\0" "00", 8);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out.append(h, 512);
    out += e.data;
    out.append((512 - e.data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

// A temporary KILN_DATA and KILN_CATALOGUE, restored at the end.
struct Env {
  test::TempDir dir{"hostile_files"};
  Env() {
    fs::create_directories(dir.path / "data");
    fs::create_directories(dir.path / "src");
    ::setenv("KILN_DATA", (dir.path / "data").c_str(), 1);
    ::unsetenv("KILN_CATALOGUE");
  }
  ~Env() {
    ::unsetenv("KILN_DATA");
    ::unsetenv("KILN_CATALOGUE");
  }
  void catalogue(const nlohmann::json& datasets) const {
    nlohmann::json j = nlohmann::json::object();
    j["datasets"] = datasets;
    write(dir.path / "catalogue.json", j.dump());
    ::setenv("KILN_CATALOGUE", (dir.path / "catalogue.json").c_str(), 1);
  }
  // A data set of one archive with `entries`, its sha256 listed; fetched from src/.
  void archive(const std::string& name, const std::vector<TarEntry>& entries) const {
    const std::string tar = tar_of(entries);
    write(dir.path / "src" / (name + ".tar"), tar);
    catalogue({{{"name", name}, {"extract", name + ".tar"}, {"data_subdir", "d"},
                {"files", {{{"name", name + ".tar"}, {"sha256", sha256(tar)}}}}}});
  }
  FetchOptions from_src() const {
    FetchOptions o;
    o.from = (dir.path / "src").string();
    return o;
  }
};

Checkpoint small_checkpoint() {
  Checkpoint c;
  c.weights = {{"w", full({2}, 1.0)}};
  c.optimizer = {};
  c.state_json = R"({"step": 3})";
  return c;
}

}  // namespace

TEST_CASE("JSON nested past the bound is refused before parsing, naming the file") {
  io::check_json_depth(R"({"a": [[{"b": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}]]})",
                       "f.json");
  std::string deep(io::kMaxJsonDepth, '[');
  io::check_json_depth(deep + std::string(io::kMaxJsonDepth, ']'), "f.json");
  CHECK_THROWS_KILN(io::check_json_depth("[" + deep, "f.json"), "f.json: JSON nested deeper than 64 levels (at byte 64)");
}

TEST_CASE("a checkpoint sidecar: deep nesting, a FIFO and bad values are refused, naming file, key and value") {
  test::TempDir dir("hostile_ckpt");
  save_checkpoint(dir / "a", small_checkpoint());
  nlohmann::ordered_json side = nlohmann::ordered_json::parse(slurp(dir / "a.json"));

  // A million levels of nesting in the state: before the bound, re-serialising it overflowed the stack.
  std::string text = side.dump();
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  text.replace(text.find("\"state\":{") + 9, 0, "\"x\":" + deep + ",");
  write(dir / "deep.json", text);
  CHECK_THROWS_KILN(load_checkpoint(dir / "deep.json"), "deep.json': JSON nested deeper than 64 levels");
  CHECK(latest_checkpoint(dir.path.string()) == dir / "a.json");

  auto with = [&](const char* key, const nlohmann::ordered_json& v) {
    nlohmann::ordered_json j = side;
    j[key] = v;
    write(dir / "bad.json", j.dump());
    return dir / "bad.json";
  };
  CHECK_THROWS_KILN(load_checkpoint(with("step", -1)), "bad.json': \"step\" is -1, not an integer >= 0");
  CHECK_THROWS_KILN(load_checkpoint(with("step", "7")), "\"step\" is \"7\", not an integer >= 0");
  nlohmann::ordered_json w = side["weights"];
  w["sha256"] = "../../etc/passwd";
  CHECK_THROWS_KILN(load_checkpoint(with("weights", w)), "\"weights.sha256\" is \"../../etc/passwd\", not 64 hex");
  w = side["weights"];
  w["file"] = "../a.safetensors";
  CHECK_THROWS_KILN(load_checkpoint(with("weights", w)), "file name '../a.safetensors' must not contain '/'");
  CHECK_THROWS_KILN(load_checkpoint(with("format", 1)), "not a kiln checkpoint sidecar");

  // A FIFO where the sidecar or a tensor file belongs: refused at once, never waited on.
  REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
  CHECK_THROWS_KILN(load_checkpoint(dir / "fifo"), "fifo.json': cannot open the sidecar");
  CHECK_THROWS_KILN(load_checkpoint(dir / "fifo"), "not a regular file");
  w = side["weights"];
  w["file"] = "pipe.safetensors";
  REQUIRE(::mkfifo((dir / "pipe.safetensors").c_str(), 0600) == 0);
  CHECK_THROWS_KILN(load_checkpoint(with("weights", w)), "pipe.safetensors' is not a regular file");
  CHECK(latest_checkpoint(dir.path.string()) == dir / "a.json");
}

TEST_CASE("catalogue names, files, links and sums that would reach outside KILN_DATA are refused") {
  Env env;
  const std::string blob = "hello";
  auto one = [&](const nlohmann::json& entry) {
    env.catalogue(nlohmann::json::array({entry}));
    return catalogue();
  };
  nlohmann::json file = {{"name", "a.bin"}, {"sha256", sha256(blob)}};
  CHECK_THROWS_KILN(one({{"name", "../escape"}, {"files", {file}}}), "data set name '../escape' must be one folder");
  CHECK_THROWS_KILN(one({{"name", "/tmp/abs"}, {"files", {file}}}), "data set name '/tmp/abs'");
  CHECK_THROWS_KILN(one({{"name", ".."}, {"files", {file}}}), "data set name '..'");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"files", {{{"name", "../a.bin"}}}}}), "bad file name '../a.bin'");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"extract", "../../outside.tar"}, {"files", {file}}}),
                    "\"extract\" '../../outside.tar' is not one of its files");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"data_subdir", "../.."}, {"files", {file}}}),
                    "\"data_subdir\" '../..' must be a relative path inside the data set");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"data_subdir", "/etc"}, {"files", {file}}}), "\"data_subdir\" '/etc'");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"files", {{{"name", "a"}, {"url", "file:///etc/shadow"}}}}}),
                    "\"url\" 'file:///etc/shadow' is not http:// or https://");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"files", {{{"name", "a"}, {"url", "--config=/tmp/c"}}}}}),
                    "\"url\" '--config=/tmp/c'");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"files", {{{"name", "a"}, {"bytes", -5}}}}}), "\"bytes\" is -5");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"files", {{{"name", "a"}, {"md5", "not-a-sum"}}}}}),
                    "\"md5\" 'not-a-sum' is not 32 hex digits");
  CHECK_THROWS_KILN(one({{"name", "x"}, {"manual", "yes"}, {"files", {file}}}), "\"manual\" is \"yes\"");
  // A catalogue nested past the bound, and a FIFO named by KILN_CATALOGUE.
  write(env.dir.path / "deep.json", "{\"datasets\": " + std::string(100, '[') + std::string(100, ']') + "}");
  ::setenv("KILN_CATALOGUE", (env.dir.path / "deep.json").c_str(), 1);
  CHECK_THROWS_KILN(catalogue(), "deep.json': JSON nested deeper than 64 levels");
  REQUIRE(::mkfifo((env.dir.path / "fifo.json").c_str(), 0600) == 0);
  ::setenv("KILN_CATALOGUE", (env.dir.path / "fifo.json").c_str(), 1);
  CHECK_THROWS_KILN(catalogue(), "fifo.json': cannot open");
  CHECK_THROWS_KILN(catalogue(), "not a regular file");

  // The data set's folder is a symlink out of the data root: fetch refuses to write through it.
  write(env.dir.path / "src" / "a.bin", blob);
  env.catalogue({{{"name", "linked"}, {"files", {file}}}});
  fs::create_directories(env.dir.path / "outside");
  fs::create_directory_symlink(env.dir.path / "outside", env.dir.path / "data" / "linked");
  CHECK_THROWS_KILN(fetch_dataset("linked", env.from_src()), "outside the data directory");
  CHECK(!fs::exists(env.dir.path / "outside" / "a.bin"));

  // A .part planted as a symlink to a file elsewhere: removed, never written through.
  env.catalogue({{{"name", "partial"}, {"files", {file}}}});
  write(env.dir.path / "victim", "keep");
  fs::create_directories(env.dir.path / "data" / "partial");
  fs::create_symlink(env.dir.path / "victim", env.dir.path / "data" / "partial" / "a.bin.part");
  fetch_dataset("partial", env.from_src());
  CHECK(slurp(env.dir.path / "victim") == "keep");
  CHECK(slurp(env.dir.path / "data" / "partial" / "a.bin") == blob);

  // A FIFO as the --from source: refused at once.
  REQUIRE(::mkfifo((env.dir.path / "src" / "p.bin").c_str(), 0600) == 0);
  env.catalogue({{{"name", "piped"}, {"files", {{{"name", "p.bin"}, {"sha256", sha256(blob)}}}}}});
  CHECK_THROWS_KILN(fetch_dataset("piped", env.from_src()), "source '" + (env.dir.path / "src" / "p.bin").string() +
                                                                "' is not a regular file");
}

TEST_CASE("every checksum the catalogue lists must match: a right md5 does not excuse a wrong sha256") {
  Env env;
  const std::string blob = "the published bytes";
  write(env.dir.path / "src" / "a.bin", blob);
  const std::string wrong = sha256("other bytes");
  env.catalogue({{{"name", "both"}, {"files", {{{"name", "a.bin"}, {"md5", md5(blob)}, {"sha256", wrong}}}}}});
  CHECK_THROWS_KILN(fetch_dataset("both", env.from_src()), "checksum mismatch: sha256 " + sha256(blob) +
                                                               ", expected " + wrong);
  CHECK(!fs::exists(env.dir.path / "data" / "both" / "a.bin"));
  CHECK(!fs::exists(env.dir.path / "data" / "both" / "a.bin.part"));
  DataFile f;
  f.name = "a.bin";
  f.md5 = md5(blob);
  f.sha256 = sha256(blob);
  const FileCheck ok = check_file(f, (env.dir.path / "src" / "a.bin").string());
  CHECK(ok.ok);
  CHECK(ok.detail == "sha256 and md5 ok");
  f.md5 = md5("x");
  CHECK_FALSE(check_file(f, (env.dir.path / "src" / "a.bin").string()).ok);
}

TEST_CASE("archive members that would land outside the data set are refused before tar runs") {
  Env env;
  const std::vector<TarEntry> good = {{"d/", '5'}, {"d/a.bin", '0', "data"}, {"d/link", '2', "", "a.bin"},
                                      {"d/sub/", '5'}, {"d/sub/hard", '1', "", "d/a.bin"}};
  env.archive("good", good);
  fetch_dataset("good", env.from_src());
  CHECK(slurp(env.dir.path / "data" / "good" / "d" / "a.bin") == "data");
  CHECK(slurp(env.dir.path / "data" / "good" / "d" / "link") == "data");
  CHECK(slurp(env.dir.path / "data" / "good" / "d" / "sub" / "hard") == "data");

  struct Case {
    std::vector<TarEntry> entries;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"d/../../../escaped", '0', "x"}}, "member 'd/../../../escaped' would land outside"},
      {{{"/tmp/escaped", '0', "x"}}, "member '/tmp/escaped' would land outside"},
      {{{"d/..", '5'}}, "member 'd/..' would land outside"},
      {{{"d/", '5'}, {"d/out", '2', "", "/etc"}}, "member 'd/out' is a symlink to '/etc'"},
      {{{"d/", '5'}, {"d/up", '2', "", "../../.."}}, "member 'd/up' is a symlink to '../../..'"},
      // Lexically inside, but through another link it would climb: any ".." in a target is refused.
      {{{"d/", '5'}, {"d/x/y/p", '2', "", "../.."}, {"d/x/y/s", '2', "", "p/.."}}, "symlink to '../..'"},
      {{{"d/", '5'}, {"d/h", '1', "", "../../etc/passwd"}}, "member 'd/h' is a hard link to '../../etc/passwd'"},
      {{{"d/", '5'}, {"d/dev", '3'}}, "member 'd/dev' is of tar type '3'"},
      {{{"d/", '5'}, {"d/fifo", '6'}}, "member 'd/fifo' is of tar type '6'"},
      // The name a pax header or a GNU long-name record gives is the one checked.
      {{{"d/", '5'}, {"PaxHeader/x", 'x', "19 path=../../evil\n"}, {"d/innocent", '0', "x"}},
       "member '../../evil' would land outside"},
      {{{"d/", '5'}, {"././@LongLink", 'L', std::string("../../evil2") + '\0'}, {"d/innocent", '0', "x"}},
       "member '../../evil2' would land outside"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "bad" + std::to_string(i);
    env.archive(name, cases[i].entries);
    CHECK_THROWS_KILN(fetch_dataset(name, env.from_src()), cases[i].message);
    CHECK(!fs::exists(env.dir.path / "data" / name / "d"));  // nothing unpacked
  }
  CHECK(!fs::exists(env.dir.path / "escaped"));
  CHECK(!fs::exists("/tmp/escaped"));

  // Not a tar at all, and one cut inside a member.
  write(env.dir.path / "junk.tar", std::string(1024, 'x'));
  CHECK_THROWS_KILN(tar_members((env.dir.path / "junk.tar").string()), "not a tar archive");
  write(env.dir.path / "cut.tar", tar_of({{"d/a.bin", '0', std::string(5000, 'a')}}).substr(0, 2048));
  CHECK_THROWS_KILN(tar_members((env.dir.path / "cut.tar").string()), "ends inside a member");
}

// A data-loader thread that cannot start: the ones started are joined and a kiln::Error says
// so. Before, the half-built loader destroyed joinable std::threads and the process aborted.
TEST_CASE("a data loader whose threads cannot all start throws, joining the ones that did") {
  auto data = std::make_shared<SyntheticDataset>(Shape{1, 4, 4}, 2, 64);
  DataLoaderOptions o;
  o.batch_size = 8;
  CHECK_THROWS_KILN((o.workers = kMaxWorkers + 1, DataLoader(data, o)), "workers 1025 is more than 1024");
  o.workers = 256;
  auto build = [&]() -> std::string {
    try {
      DataLoader dl(data, o);
    } catch (const Error& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a kiln::Error: ") + e.what();
    }
    return "no error";
  };

  // No thread can start: a default stack of 2^46 bytes cannot be mapped (works under qemu too).
  pthread_attr_t old_attr, huge;
  REQUIRE(pthread_getattr_default_np(&old_attr) == 0);
  REQUIRE(pthread_attr_init(&huge) == 0);
  REQUIRE(pthread_attr_setstacksize(&huge, size_t(1) << 46) == 0);
  REQUIRE(pthread_setattr_default_np(&huge) == 0);
  const std::string none = build();
  REQUIRE(pthread_setattr_default_np(&old_attr) == 0);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&old_attr);
  const std::string shown_none = "no thread: " + none;
  MESSAGE(shown_none);
  CHECK(none.find("DataLoader: cannot start data-loader thread 1 of 256") == 0);

// Natively only: capping qemu-user's own address space would break the emulator, and under
// AddressSanitizer a capped internal mapping ends the process instead of failing the thread start.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
  // Some start, then the rest cannot: address space capped just above what the process uses, so
  // thread stacks (8 MiB each) run out part way.
  struct rlimit old;
  REQUIRE(::getrlimit(RLIMIT_AS, &old) == 0);
  long pages = 0;
  {
    std::ifstream statm("/proc/self/statm");
    statm >> pages;
  }
  REQUIRE(pages > 0);
  struct rlimit cap = old;
  cap.rlim_cur = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + (rlim_t(64) << 20);
  REQUIRE(::setrlimit(RLIMIT_AS, &cap) == 0);
  const std::string some = build();
  REQUIRE(::setrlimit(RLIMIT_AS, &old) == 0);
  const std::string shown_some = "some threads: " + some;
  MESSAGE(shown_some);
  CHECK(some.find("DataLoader: cannot start data-loader thread ") == 0);
  CHECK(some.find("DataLoader: cannot start data-loader thread 1 of") == std::string::npos);
  CHECK(some.find("of 256") != std::string::npos);
#endif
  DataLoader fine(data, o);  // with the limits lifted the same options work
  CHECK(fine.batches_per_epoch() == 8);
}
