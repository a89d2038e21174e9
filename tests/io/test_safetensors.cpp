// safetensors checkpoints: bit-exact round trips of every dtype, module round trips, atomic writes,
// and a clear kiln::Error (never a crash) for each kind of corrupt file.
//   ctest --test-dir build -R io.test_safetensors
#include "tests/support/testing.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/formats/safetensors.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test case, removed afterwards.

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}
// A file from a hand-written header and `data_bytes` zero bytes of data (header unpadded).
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  write_bytes(path, len + header + std::string(data_bytes, '\0'));
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  size_t n = size_t(ca.numel()) * ca.element_size();
  return n == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), n) == 0;
}

// Loading `path` throws kiln::Error whose message has `what` and the file name.
void expect_load_error(const std::string& path, const std::string& what) {
  CAPTURE(what);
  CHECK_THROWS_KILN(load_safetensors(path), what);
  CHECK_THROWS_KILN(load_safetensors(path), path);
}

}  // namespace

TEST_CASE("every dtype, a 0-d, an empty and a non-contiguous tensor round-trip bit-exactly") {
  test::TempDir tmp("safetensors");
  NamedTensors in;
  const DType dtypes[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16,
                          DType::int32,   DType::int64,   DType::uint8};
  uint64_t seed = 1;
  for (DType t : dtypes) {
    double lo = t == DType::uint8 ? 0 : -100, hi = t == DType::uint8 ? 250 : 100;
    in.emplace_back(std::string("t_") + dtype_name(t), test::make_input({3, 5}, seed++, DType::float64, lo, hi).to(t));
  }
  in.emplace_back("scalar", scalar_tensor(3.25, DType::float64));
  in.emplace_back("empty", zeros({0, 4}, DType::float32));
  in.emplace_back("strided", test::non_contiguous(test::make_input({4, 3}, 9, DType::float32)));
  std::map<std::string, std::string> meta{{"format", "pt"}, {"epoch", "7"}};
  std::string path = tmp / "all.safetensors";
  save_safetensors(path, in, meta);

  // Header length is a multiple of 8, as the format recommends.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);

  std::map<std::string, std::string> got_meta;
  NamedTensors out = load_safetensors(path, &got_meta);
  CHECK(got_meta == meta);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    CAPTURE(in[i].first);
    CHECK(out[i].first == in[i].first);
    CHECK(out[i].second.is_contiguous());
    CHECK(bit_equal(out[i].second, in[i].second));
  }
  CHECK(out[7].second.dim() == 0);
  CHECK(out[7].second.item() == 3.25);
  CHECK(out[8].second.sizes() == Shape{0, 4});
  CHECK(tmp.names() == std::vector<std::string>{"all.safetensors"});

  // Saving again replaces the file.
  save_safetensors(path, {{"x", ones({2})}});
  out = load_safetensors(path, &got_meta);
  CHECK(out.size() == 1);
  CHECK(got_meta.empty());
  CHECK_THROWS_KILN(save_safetensors(path, {{"x", ones({1})}, {"x", ones({1})}}), "duplicate tensor name 'x'");
}

TEST_CASE("a module round trip gives identical outputs") {
  test::TempDir tmp("safetensors");
  auto build = [] {
    auto net = make<Sequential>();
    net->add(make<Conv2d>(3, 4, 3, 1, 1)).add(make<BatchNorm2d>(4)).add(make<ReLU>()).add(make<Flatten>())
        .add(make<Linear>(4 * 5 * 5, 6));
    return net;
  };
  manual_seed(11);
  auto a = build();
  // A training step moves the BatchNorm running stats away from their defaults.
  a->train();
  a->forward(test::make_input({2, 3, 5, 5}, 3, DType::float32));
  a->eval();
  manual_seed(12);
  auto b = build();
  b->eval();
  Tensor x = test::make_input({2, 3, 5, 5}, 4, DType::float32);
  std::string path = tmp / "net.safetensors";
  save_module(*a, path, {{"arch", "tiny"}});
  CHECK(!bit_equal(a->forward(x), b->forward(x)));
  load_module(*b, path);
  CHECK(bit_equal(a->forward(x), b->forward(x)));
  std::map<std::string, std::string> meta;
  CHECK(load_safetensors(path, &meta).size() == a->state_dict().size());
  CHECK(meta.at("arch") == "tiny");

  // A file for another net: strict loading names the file and the mismatch.
  save_safetensors(tmp / "other.safetensors", {{"0.weight", zeros({4, 3, 3, 3})}});
  CHECK_THROWS_KILN(load_module(*b, tmp / "other.safetensors"), "missing keys");
  CHECK_THROWS_KILN(load_module(*b, tmp / "other.safetensors"), "other.safetensors");
  load_module(*b, tmp / "other.safetensors", /*strict=*/false);
}

TEST_CASE("writes are atomic: a failed save leaves no temp file and names the path") {
  test::TempDir tmp("safetensors");
  // The target is a directory, so the final rename fails after the data was written.
  std::string path = tmp / "dir_in_the_way";
  fs::create_directories(path);
  CHECK_THROWS_KILN(save_safetensors(path, {{"x", ones({3})}}), "dir_in_the_way");
  CHECK(tmp.names() == std::vector<std::string>{"dir_in_the_way"});
  // The directory does not exist: the temp file cannot even be created.
  CHECK_THROWS_KILN(save_safetensors(tmp / "no/such/dir/x.safetensors", {{"x", ones({3})}}),
                    "no/such/dir/x.safetensors");
  CHECK(tmp.names() == std::vector<std::string>{"dir_in_the_way"});
}

TEST_CASE("truncated and corrupt files give a kiln::Error naming what and where") {
  test::TempDir tmp("safetensors");
  std::string good = tmp / "good.safetensors";
  save_safetensors(good, {{"a", test::make_input({2, 3}, 1, DType::float32)}, {"b", arange(4, DType::int64)}});
  const std::string bytes = read_bytes(good);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  std::string bad = tmp / "bad.safetensors";

  SUBCASE("truncated") {
    for (size_t cut : {size_t(0), size_t(5)}) {
      write_bytes(bad, bytes.substr(0, cut));
      expect_load_error(bad, "shorter than the 8-byte header length");
    }
    for (size_t cut : {size_t(8), size_t(9), size_t(8 + n / 2), size_t(8 + n - 1)}) {
      write_bytes(bad, bytes.substr(0, cut));
      expect_load_error(bad, "runs past the end of the file");
    }
    write_bytes(bad, bytes.substr(0, 8 + n + 30));
    expect_load_error(bad, "out of range");
    write_bytes(bad, bytes.substr(0, bytes.size() - 1));
    expect_load_error(bad, "tensor 'b': data_offsets [24, 56] out of range");
    write_bytes(bad, bytes.substr(0, 8 + n));
    expect_load_error(bad, "tensor 'a'");
  }
  SUBCASE("header bytes flipped") {
    std::string b = bytes;
    b[8] = 'x';
    write_bytes(bad, b);
    expect_load_error(bad, "invalid JSON header at byte 8");
    b = bytes;
    b[7] = 0x7f;  // an absurd header length
    write_bytes(bad, b);
    expect_load_error(bad, "runs past the end of the file");
    b = bytes;
    b.replace(b.find("F32"), 3, "F99");
    write_bytes(bad, b);
    expect_load_error(bad, "tensor 'a': unknown dtype 'F99'");
  }
  SUBCASE("bad offsets, shapes and names") {
    write_raw(bad, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8);
    expect_load_error(bad, "tensor 'a': data_offsets [0, 4] span 4 bytes but dtype and shape need 8");
    write_raw(bad, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
    expect_load_error(bad, "tensor 'a': data_offsets [0, 16] out of range");
    write_raw(bad, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8);
    expect_load_error(bad, "out of range");
    write_raw(bad, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})", 12);
    expect_load_error(bad, "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
    write_raw(bad, R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2);
    expect_load_error(bad, "duplicate tensor name 'a'");
    write_raw(bad, R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1);
    expect_load_error(bad, "tensor 'a': shape has a non-integer or negative size");
    write_raw(bad, R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,1]}})", 1);
    expect_load_error(bad, "tensor 'a': shape too large");
    write_raw(bad, R"({"a":{"dtype":"U8","shape":[1]}})", 1);
    expect_load_error(bad, "tensor 'a': data_offsets missing");
    write_raw(bad, R"({"a":{"shape":[1],"data_offsets":[0,1]}})", 1);
    expect_load_error(bad, "tensor 'a': missing or non-string dtype");
    write_raw(bad, R"([1, 2])", 0);
    expect_load_error(bad, "not a JSON object");
    write_raw(bad, R"({"__metadata__":{"k":1}})", 0);
    expect_load_error(bad, "__metadata__ value 'k' is not a string");
    expect_load_error(tmp / "missing.safetensors", "cannot open");
  }
  SUBCASE("every single-byte corruption either loads or throws kiln::Error") {
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (char c : {char(0), char(0xff), '"', '9'}) {
        std::string b = bytes;
        b[i] = c;
        write_bytes(bad, b);
        try {
          load_safetensors(bad);
        } catch (const Error&) {
        }
      }
    }
  }
}
