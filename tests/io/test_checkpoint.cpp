// Checkpoint sets: bit-equal round trip, damaged sets refused with the file named, leftover temp
// files ignored, latest_checkpoint by step. The PyPI safetensors package loading the weights
// file: test_python_interop.cpp.
//   ctest --test-dir build -R io.test_checkpoint
#include "tests/support/testing.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/random.h"
#include "io/formats/checkpoint.h"
#include "io/formats/digest.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

Checkpoint sample(int64_t step, uint64_t seed = 1) {
  Generator gen(seed);
  Checkpoint c;
  c.weights = {{"conv1.weight", randn({8, 1, 3, 3}, {}, &gen)},
               {"conv1.bias", randn({8}, {}, &gen)},
               {"bn.running_mean", randn({8}, DType::float64, &gen)},
               {"bn.num_batches_tracked", full({}, 123, DType::int64)},
               {"fc.weight", randn({10, 72}, {}, &gen)}};
  c.optimizer = {{"exp_avg.conv1.weight", randn({8, 1, 3, 3}, {}, &gen)}, {"step", full({}, double(step))}};
  c.state_json = R"({"model":"mnist-cnn","step":)" + std::to_string(step) +
                 R"(,"epoch":1,"optimizer":{"name":"adam","lr":0.001},"rng":[1,2,3]})";
  return c;
}

std::string raw_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), size_t(c.numel()) * c.element_size());
}

void check_equal(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.dtype() == b[i].second.dtype());
    CHECK(a[i].second.sizes() == b[i].second.sizes());
    CHECK_MESSAGE(raw_bytes(a[i].second) == raw_bytes(b[i].second), a[i].first);
  }
}

void flip_byte(const std::string& path, long offset_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-offset_from_end, std::ios::end);
  char c;
  f.get(c);
  f.seekp(-offset_from_end, std::ios::end);
  f.put(char(c ^ 0x01));
}

}  // namespace

TEST_CASE("sha256 and md5 through libcrypto match the standard vectors") {
  CHECK(io::digest_hex("sha256", "abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(io::digest_hex("md5", "", 0) == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK_THROWS_KILN(io::digest_hex("crc", "", 0), "unknown algorithm 'crc'");
}

TEST_CASE("a checkpoint round-trips bit for bit") {
  test::TempDir dir("ckpt_roundtrip");
  Checkpoint c = sample(100);
  save_checkpoint(dir / "ckpt-100", c);
  CHECK(fs::exists(dir / "ckpt-100.safetensors"));
  CHECK(fs::exists(dir / "ckpt-100.optim.safetensors"));
  CHECK(fs::exists(dir / "ckpt-100.json"));
  for (const std::string& arg : {dir / "ckpt-100", dir / "ckpt-100.json"}) {
    Checkpoint r = load_checkpoint(arg);
    check_equal(r.weights, c.weights);
    check_equal(r.optimizer, c.optimizer);
    CHECK(nlohmann::json::parse(r.state_json) == nlohmann::json::parse(c.state_json));
  }
  Checkpoint plain = c;  // plain SGD keeps no optimizer tensors
  plain.optimizer.clear();
  save_checkpoint(dir / "plain", plain);
  CHECK(load_checkpoint(dir / "plain").optimizer.empty());
  Checkpoint bad = c;
  bad.state_json = "[1,2]";
  CHECK_THROWS_KILN(save_checkpoint(dir / "x", bad), "state_json must be a JSON object");
  bad.state_json = "{not json";
  CHECK_THROWS_KILN(save_checkpoint(dir / "x", bad), "state_json must be a JSON object");
}

TEST_CASE("truncated, corrupt, missing and mismatched sets throw naming the file") {
  test::TempDir dir("ckpt_damaged");
  save_checkpoint(dir / "a", sample(1, 1));
  save_checkpoint(dir / "b", sample(2, 2));

  fs::resize_file(dir / "a.safetensors", fs::file_size(dir / "a.safetensors") - 4);
  CHECK_THROWS_KILN(load_checkpoint(dir / "a"), "a.safetensors' has ");

  save_checkpoint(dir / "a", sample(1, 1));
  flip_byte(dir / "a.optim.safetensors", 3);
  CHECK_THROWS_KILN(load_checkpoint(dir / "a"), "sha256 of '" + (dir / "a.optim.safetensors") + "'");

  // b's weights in place of a's: same size, other content.
  save_checkpoint(dir / "a", sample(1, 1));
  fs::copy_file(dir / "b.safetensors", dir / "a.safetensors", fs::copy_options::overwrite_existing);
  CHECK_THROWS_KILN(load_checkpoint(dir / "a.json"), "from another checkpoint");

  fs::remove(dir / "b.optim.safetensors");
  CHECK_THROWS_KILN(load_checkpoint(dir / "b"), "b.optim.safetensors' is missing");

  {
    std::ofstream(dir / "c.json") << "{\"format\": \"kiln-checkpoint\", \"weights\": 3";
  }
  CHECK_THROWS_KILN(load_checkpoint(dir / "c"), "c.json': the sidecar is not valid JSON");
  // A missing checkpoint names the directory and what it holds.
  CHECK_THROWS_KILN(load_checkpoint(dir / "nope"), "no sidecar 'nope.json' in directory '" + dir.path.string() +
                                                       "' (a checkpoint is <prefix>.json beside its .safetensors "
                                                       "files; it holds a.json, b.json, c.json)");
  CHECK_THROWS_KILN(load_checkpoint(dir.path.string() + "/no/such/x"), "directory '" + dir.path.string() + "/no/such' does not exist");
  CHECK_THROWS_KILN(load_checkpoint(""), "load_checkpoint: the path is empty");
  CHECK(latest_checkpoint(dir.path.string()) == "");  // a and b are both damaged
}

TEST_CASE("latest_checkpoint picks the highest complete step and ignores temp files") {
  test::TempDir dir("ckpt_latest");
  CHECK(latest_checkpoint(dir.path.string()) == "");
  CHECK(latest_checkpoint((dir.path / "missing").string()) == "");
  save_checkpoint(dir / "ckpt-000200", sample(200));
  save_checkpoint(dir / "ckpt-000100", sample(100));
  { std::ofstream(dir / "notes.json") << R"({"hello": 1})"; }
  CHECK(latest_checkpoint(dir.path.string()) == dir / "ckpt-000200.json");

  // A save killed after its tensor files: the leftovers of a newer step, with temp names and no
  // sidecar, change nothing.
  fs::copy_file(dir / "ckpt-000200.safetensors", dir / "ckpt-000300.safetensors.tmp.4242");
  fs::copy_file(dir / "ckpt-000200.json", dir / "ckpt-000300.json.tmp.4242");
  fs::copy_file(dir / "ckpt-000200.safetensors", dir / "ckpt-000300.safetensors");
  CHECK(latest_checkpoint(dir.path.string()) == dir / "ckpt-000200.json");
  Checkpoint r = load_checkpoint(latest_checkpoint(dir.path.string()));
  CHECK(nlohmann::json::parse(r.state_json)["step"] == 200);

  // The newest set damaged: fall back to the previous complete one.
  flip_byte(dir / "ckpt-000200.safetensors", 1);
  CHECK(latest_checkpoint(dir.path.string()) == dir / "ckpt-000100.json");
}

