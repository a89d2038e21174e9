// Shape op values: cat/stack/split/chunk, every pad mode (with crops), nearest and bilinear
// upsampling (hand-computed cases and numbers produced by PyTorch 1.13, pasted as literals), and
// bad-argument errors. Value checks run on both the ref and the native backend, in double.
//   ctest --test-dir build -R kernels.test_shape
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/shape.h"

using namespace kiln;

namespace {

const char* kBackends[] = {"ref", "native"};

Tensor vec(const std::vector<double>& v, const Shape& s) { return from_vector(v, s, DType::float64); }
Tensor iota(const Shape& s) { return arange(shape_numel(s), DType::float64).reshape(s); }

// x[i] = sin(0.37 i + 0.1) over the flat index, as in the PyTorch script that made the literals.
Tensor sin_input(const Shape& s) {
  std::vector<double> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + 0.1);
  return vec(v, s);
}

constexpr double kRtol = 1e-8, kAtol = 1e-9;

}  // namespace

TEST_CASE("cat, stack, split, chunk") {
  Tensor a = iota({2, 3}), b = iota({2, 1}) + 10.0, c = iota({1, 3}) + 20.0;
  CHECK(ops::cat({a, b}, 1).to_vector() == std::vector<double>{0, 1, 2, 10, 3, 4, 5, 11});
  CHECK(ops::cat({a, c}, 0).to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5, 20, 21, 22});
  CHECK(ops::cat({a, b}, -1).sizes() == Shape{2, 4});
  CHECK(ops::cat({a.t(), c.t()}, 1).to_vector() == std::vector<double>{0, 3, 20, 1, 4, 21, 2, 5, 22});
  CHECK(ops::stack({a, a * 2.0}, 1).sizes() == Shape{2, 2, 3});
  CHECK(ops::stack({b, b}, 2).to_vector() == std::vector<double>{10, 10, 11, 11});

  auto parts = ops::split(iota({7, 2}), {3, 0, 4}, 0);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].sizes() == Shape{3, 2});
  CHECK(parts[1].sizes() == Shape{0, 2});
  CHECK(parts[2].to_vector() == std::vector<double>{6, 7, 8, 9, 10, 11, 12, 13});
  auto ch = ops::chunk(iota({2, 7}), 3, 1);  // 7 = 3 + 3 + 1
  REQUIRE(ch.size() == 3);
  CHECK(ch[2].to_vector() == std::vector<double>{6, 13});
  CHECK(ops::chunk(iota({4}), 3).size() == 2);  // ceil(4 / 3) = 2 per chunk: 2 + 2, as torch.chunk
}

TEST_CASE("pad: every mode, 1-d and 2-d, with crops") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    Tensor r = vec({1, 2, 3}, {1, 3});
    CHECK(ops::pad(r, {2, 1}, PadMode::constant, 9).to_vector() == std::vector<double>{9, 9, 1, 2, 3, 9});
    CHECK(ops::pad(r, {2, 1}, PadMode::reflect).to_vector() == std::vector<double>{3, 2, 1, 2, 3, 2});
    CHECK(ops::pad(r, {2, 1}, PadMode::replicate).to_vector() == std::vector<double>{1, 1, 1, 2, 3, 3});
    CHECK(ops::pad(r, {2, 1}, PadMode::circular).to_vector() == std::vector<double>{2, 3, 1, 2, 3, 1});
    CHECK(ops::pad(r, {-1, 1}).to_vector() == std::vector<double>{2, 3, 0});
    CHECK(ops::pad(r, {-1, -1}, PadMode::reflect).to_vector() == std::vector<double>{2});
    // Crop then wrap: {1, 2, 3, 4} cropped on the right to {1, 2, 3}, then one wrapped on the left.
    CHECK(ops::pad(vec({1, 2, 3, 4}, {4}), {1, -1}, PadMode::circular).to_vector() ==
          std::vector<double>{3, 1, 2, 3});
    CHECK(ops::pad(vec({1, 2, 3, 4}, {4}), {-2, 2}, PadMode::circular).to_vector() ==
          std::vector<double>{3, 4, 3, 4});

    Tensor x = iota({1, 1, 2, 3});  // [[0 1 2] [3 4 5]]
    CHECK(ops::pad(x, {1, 0, 0, 1}).to_vector() == std::vector<double>{0, 0, 1, 2, 0, 3, 4, 5, 0, 0, 0, 0});
    CHECK(ops::pad(x, {1, 1, 1, 0}, PadMode::reflect).to_vector() ==
          std::vector<double>{4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4});
    CHECK(ops::pad(x, {0, 1, 1, 1}, PadMode::replicate).to_vector() ==
          std::vector<double>{0, 1, 2, 2, 0, 1, 2, 2, 3, 4, 5, 5, 3, 4, 5, 5});
    CHECK(ops::pad(x, {1, 0, 1, 0}, PadMode::circular).to_vector() ==
          std::vector<double>{5, 3, 4, 5, 2, 0, 1, 2, 5, 3, 4, 5});
    // Crop the first column and the last row, pad one column on the right.
    CHECK(ops::pad(x, {-1, 1, 0, -1}, PadMode::constant, -1).to_vector() == std::vector<double>{1, 2, -1});
    CHECK(ops::pad(iota({2, 0}), {1, 1}, PadMode::constant, 7).to_vector() == std::vector<double>{7, 7, 7, 7});
  }
}

TEST_CASE("upsample: hand-computed values") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    Tensor x = vec({1, 2, 3, 4}, {1, 1, 2, 2});
    CHECK(ops::upsample_nearest2d(x, 2.0, 2.0).to_vector() ==
          std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    CHECK(ops::upsample_nearest2d(x, {1, 3}).to_vector() == std::vector<double>{1, 1, 2});
    CHECK(ops::upsample_bilinear2d(x, {3, 3}, true).to_vector() ==
          std::vector<double>{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
    // Half-pixel centres: out 0 reads src -0.25 (clamped to 0), out 1 reads 0.25, out 2 reads 0.75.
    CHECK_CLOSE(ops::upsample_bilinear2d(vec({0, 4}, {1, 1, 1, 2}), {1, 4}, false),
                vec({0, 1, 3, 4}, {1, 1, 1, 4}), 0, 1e-15);
    CHECK(ops::upsample_bilinear2d(x, {2, 2}).to_vector() == std::vector<double>{1, 2, 3, 4});
  }
}

TEST_CASE("upsample matches PyTorch (numbers from torch 1.13 F.interpolate)") {
  Tensor x = sin_input({1, 1, 3, 4});
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    // size=(5, 7), mode='bilinear', align_corners=False
    CHECK_CLOSE(ops::upsample_bilinear2d(x, {5, 7}, false),
                vec({0.09983341665, 0.2259237269, 0.4276682233, 0.5987647027, 0.7582840401, 0.867411401,
                     0.9356160016, 0.4598831086, 0.5253947331, 0.6302133323, 0.6914970534, 0.7394106485,
                     0.7372682394, 0.7359292338, 0.9999576465, 0.9746012424, 0.9340309958, 0.8305955795, 0.711100561,
                     0.5420534971, 0.4363990822, 0.4488843497, 0.3603286742, 0.2186395936, 0.06335315076,
                     -0.093158228, -0.2446467964, -0.3393271516, 0.08150215176, -0.0491863712, -0.2582880079,
                     -0.4481418017, -0.629330754, -0.7691136587, -0.8564779742},
                    {1, 1, 5, 7}),
                kRtol, kAtol);
    // size=(5, 7), mode='bilinear', align_corners=True
    CHECK_CLOSE(ops::upsample_bilinear2d(x, {5, 7}, true),
                vec({0.09983341665, 0.276359851, 0.4528862854, 0.5987647027, 0.74464312, 0.8401295608,
                     0.9356160016, 0.5498955316, 0.6204092659, 0.6909230002, 0.7146801411, 0.738437282,
                     0.7122224119, 0.6860075419, 0.9999576465, 0.9644586808, 0.928959715, 0.8305955795, 0.732231444,
                     0.5843152631, 0.4363990822, 0.5407298991, 0.4314984502, 0.3222670012, 0.1912268889,
                     0.06018677654, -0.07492633473, -0.210039446, 0.08150215176, -0.1014617804, -0.2844257125,
                     -0.4481418017, -0.6118578909, -0.7341679326, -0.8564779742},
                    {1, 1, 5, 7}),
                kRtol, kAtol);
    // scale_factor=1.5, mode='bilinear', align_corners=False: output 4x6, source scale 1/1.5.
    CHECK_CLOSE(ops::upsample_bilinear2d(x, 1.5, 1.5, false),
                vec({0.09983341665, 0.276359851, 0.5015124245, 0.6960169809, 0.8401295608, 0.9356160016,
                     0.5498955316, 0.6204092659, 0.6988420472, 0.730518235, 0.7122224119, 0.6860075419,
                     0.8468817307, 0.7868052706, 0.6903101012, 0.5446352641, 0.3645680638, 0.2209195728,
                     0.2345780676, 0.0761916298, -0.1331361736, -0.3369016361, -0.5144207333, -0.6409984648},
                    {1, 1, 4, 6}),
                kRtol, kAtol);
    // size=(5, 7), mode='nearest'
    CHECK_CLOSE(ops::upsample_nearest2d(x, {5, 7}),
                vec({0.09983341665, 0.09983341665, 0.4528862854, 0.4528862854, 0.74464312, 0.74464312,
                     0.9356160016, 0.09983341665, 0.09983341665, 0.4528862854, 0.4528862854, 0.74464312, 0.74464312,
                     0.9356160016, 0.9999576465, 0.9999576465, 0.928959715, 0.928959715, 0.732231444, 0.732231444,
                     0.4363990822, 0.9999576465, 0.9999576465, 0.928959715, 0.928959715, 0.732231444, 0.732231444,
                     0.4363990822, 0.08150215176, 0.08150215176, -0.2844257125, -0.2844257125, -0.6118578909,
                     -0.6118578909, -0.8564779742},
                    {1, 1, 5, 7}),
                kRtol, kAtol);
    // scale_factor=1.7, mode='nearest': output 5x6
    CHECK_CLOSE(ops::upsample_nearest2d(x, 1.7, 1.7),
                vec({0.09983341665, 0.09983341665, 0.4528862854, 0.4528862854, 0.74464312, 0.74464312,
                     0.09983341665, 0.09983341665, 0.4528862854, 0.4528862854, 0.74464312, 0.74464312, 0.9999576465,
                     0.9999576465, 0.928959715, 0.928959715, 0.732231444, 0.732231444, 0.9999576465, 0.9999576465,
                     0.928959715, 0.928959715, 0.732231444, 0.732231444, 0.08150215176, 0.08150215176,
                     -0.2844257125, -0.2844257125, -0.6118578909, -0.6118578909},
                    {1, 1, 5, 6}),
                kRtol, kAtol);
  }
}

TEST_CASE("shape op errors name the op and shapes") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_KILN(ops::cat({a, zeros({1, 3}), zeros({2, 4})}, 0),
                    "cat: tensor 2 has shape [2, 4] but tensor 0 has [2, 3]; sizes must match except in dim 0");
  CHECK_THROWS_KILN(ops::cat({a, zeros({2, 3, 1})}, 1), "cat: tensor 1 has shape [2, 3, 1]");
  CHECK_THROWS_KILN(ops::cat({a, zeros({2, 3}, DType::float64)}, 1), "cat: tensor 1 is float64 [2, 3]");
  CHECK_THROWS_KILN(ops::cat({}, 0), "cat: expected a non-empty list");
  CHECK_THROWS_KILN(ops::cat({a}, 2), "cat: dim 2 out of range");
  CHECK_THROWS_KILN(ops::stack({a, zeros({3, 2})}), "stack: tensor 1 has shape [3, 2] but tensor 0 has [2, 3]");
  CHECK_THROWS_KILN(ops::split(a, {1, 1}, 1), "split: sizes [1, 1] sum to 2 but dim 1 of [2, 3] has size 3");
  CHECK_THROWS_KILN(ops::chunk(a, 0), "chunk: number of chunks must be positive");
  CHECK_THROWS_KILN(ops::pad(a, {3, 0}, PadMode::reflect),
                    "pad: reflect padding 3 must be less than the input size 3 (reflect pad [3, 0] of input [2, 3])");
  CHECK_THROWS_KILN(ops::pad(a, {1, 2, 3}), "pad: expected 2 (left, right) or 4");
  CHECK_THROWS_KILN(ops::pad(a, {-2, 2}, PadMode::circular),
                    "pad: circular padding 2 must be at most the (cropped) input size 1");
  CHECK_THROWS_KILN(ops::pad(zeros({3}), {1, 1, 1, 1}), "pad: 4 pad values need an input with at least 2 dims, got [3]");
  CHECK_THROWS_KILN(ops::pad(a, {-2, -2}), "pad: negative output size 1x-1");
  CHECK_THROWS_KILN(ops::upsample_bilinear2d(a, {4, 4}),
                    "upsample_bilinear2d: expected a 4-d (N, C, H, W) input, got [2, 3]");
  CHECK_THROWS_KILN(ops::upsample_nearest2d(zeros({1, 1, 2, 2}), {0, 3}),
                    "upsample_nearest2d: output size 0x3 must be positive (input [1, 1, 2, 2])");
  CHECK_THROWS_KILN(ops::upsample_nearest2d(zeros({1, 1, 2, 2}), -1.0, 2.0), "upsample_nearest2d: scale factors");
}
