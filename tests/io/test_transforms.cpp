// Image transforms (io/data/transforms.h): per-sample RNG determinism, crop/flip positions, bilinear
// resize against PyTorch, torchvision's center-crop rounding and the resized-crop fallback.
//   ctest --test-dir build -R test_transforms
#include <cmath>
#include <set>

#include "io/data/transforms.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

// [C, H, W] float32 with value c * 100 + y * 10 + x.
Tensor coords(int64_t c, int64_t h, int64_t w) {
  Tensor t = empty({c, h, w}, float32);
  float* d = t.data<float>();
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) *d++ = float(k * 100 + y * 10 + x);
  return t;
}

TEST_CASE("SampleRng is a pure function of (seed, epoch, index)") {
  SampleRng a(7, 3, 11), b(7, 3, 11), c(7, 4, 11), d(7, 3, 12), e(8, 3, 11);
  std::vector<uint32_t> va, vb, vc, vd, ve;
  for (int i = 0; i < 9; ++i) {
    va.push_back(a.next_u32());
    vb.push_back(b.next_u32());
    vc.push_back(c.next_u32());
    vd.push_back(d.next_u32());
    ve.push_back(e.next_u32());
  }
  CHECK(va == vb);
  CHECK(va != vc);
  CHECK(va != vd);
  CHECK(va != ve);
  SampleRng r(1, 0, 0);
  std::set<int64_t> seen;
  double sum = 0;
  for (int i = 0; i < 4000; ++i) {
    int64_t v = r.randint(3, 8);
    CHECK((v >= 3 && v < 8));
    seen.insert(v);
    double u = r.uniform();
    CHECK((u >= 0 && u < 1));
    sum += u;
  }
  CHECK(seen.size() == 5);
  CHECK(std::abs(sum / 4000 - 0.5) < 0.03);
}

TEST_CASE("crop_image and flip_image move pixels where expected, zero outside") {
  Tensor img = coords(2, 4, 5);
  Tensor c = crop_image(img, 1, 2, 2, 3);
  CHECK(c.sizes() == Shape{2, 2, 3});
  CHECK(c.at({0, 0, 0}) == 12);
  CHECK(c.at({1, 1, 2}) == 124);
  Tensor p = crop_image(img, -1, -2, 3, 4);  // padded corner
  CHECK(p.at({0, 0, 0}) == 0);
  CHECK(p.at({0, 0, 3}) == 0);   // row -1
  CHECK(p.at({0, 1, 1}) == 0);   // column -1
  CHECK(p.at({0, 1, 2}) == 0);   // pixel (0, 0) holds 0 anyway: check (1, 1) below
  CHECK(p.at({1, 2, 3}) == 111);
  Tensor f = flip_image(img);
  CHECK(f.at({0, 0, 0}) == 4);
  CHECK(f.at({1, 3, 4}) == 130);
  // uint8 goes through the same byte moves.
  Tensor u = img.to(uint8);
  CHECK(flip_image(u).dtype() == uint8);
  CHECK(flip_image(u).at({0, 2, 1}) == 23);
}

TEST_CASE("random_crop with padding and random_horizontal_flip follow the sample's stream") {
  Tensor img = coords(1, 6, 6);
  auto t = random_crop(4, 4, 2);
  for (int64_t i = 0; i < 50; ++i) {
    SampleRng r1(5, 0, i), r2(5, 0, i);
    Tensor out = t->apply(img, r1);
    int64_t top = r2.randint(0, 6 + 4 - 4 + 1) - 2, left = r2.randint(0, 7) - 2;
    CHECK(out.sizes() == Shape{1, 4, 4});
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 4; ++x) {
        int64_t sy = top + y, sx = left + x;
        double want = (sy < 0 || sy >= 6 || sx < 0 || sx >= 6) ? 0.0 : double(sy * 10 + sx);
        CHECK(out.at({0, y, x}) == want);
      }
  }
  auto flip = random_horizontal_flip(0.5);
  int flipped = 0;
  for (int64_t i = 0; i < 200; ++i) {
    SampleRng r1(9, 2, i), r2(9, 2, i);
    Tensor out = flip->apply(img, r1);
    bool expect = r2.uniform() < 0.5;
    CHECK(out.at({0, 0, 0}) == (expect ? 5 : 0));
    flipped += expect;
  }
  CHECK((flipped > 70 && flipped < 130));
  SampleRng r(0, 0, 0);
  CHECK(random_horizontal_flip(1.0)->apply(img, r).at({0, 3, 0}) == 35);
  CHECK(random_horizontal_flip(0.0)->apply(img, r).at({0, 3, 0}) == 30);
  CHECK_THROWS_KILN(random_crop(8, 8)->apply(img, r), "larger than the padded image");
}

TEST_CASE("resize is bilinear with align_corners=false, equal to torch.nn.functional.interpolate") {
  // Literals from PyTorch 1.13:
  //   x = torch.arange(24, dtype=torch.float32).reshape(1, 2, 3, 4); x = x * x % 17
  //   F.interpolate(x, size=(5, 3), mode='bilinear', align_corners=False).flatten()
  //   F.interpolate(x, size=(2, 7), mode='bilinear', align_corners=False).flatten()
  Tensor x = empty({2, 3, 4}, float32);
  for (int64_t i = 0; i < 24; ++i) x.data<float>()[i] = float((i * i) % 17);
  std::vector<double> a = {0.166667, 2.5, 8.166667, 5.966667, 3.5, 10.033335, 14.666666, 5.0, 12.833334, 13.666666,
                           10.400001, 7.633333, 13.0, 14.0, 4.166666, 9.333334, 12.5, 4.833333, 5.933333, 7.7, 4.3,
                           0.833334, 0.500001, 3.5, 6.433334, 7.400001, 3.2, 10.166667, 12.0, 3.0};
  std::vector<double> b = {4.0, 3.553571, 2.839286, 3.125, 4.000001, 8.000002, 10.5, 13.75, 13.035714, 11.892857,
                           11.75, 11.285714, 7.571427, 5.25, 6.25, 8.303572, 11.589286, 9.499999, 6.785714, 5.071428,
                           4.0, 7.0, 8.785714, 11.642858, 9.124999, 5.982143, 3.839285, 2.5};
  std::vector<double> ra = resize_image(x, 5, 3).to_vector(), rb = resize_image(x, 2, 7).to_vector();
  REQUIRE(ra.size() == a.size());
  REQUIRE(rb.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(ra[i] == doctest::Approx(a[i]).epsilon(1e-5));
  for (size_t i = 0; i < b.size(); ++i) CHECK(rb[i] == doctest::Approx(b[i]).epsilon(1e-5));
  // uint8 rounds; resize_shorter keeps the aspect ratio as torchvision (int(s * long / short)).
  Tensor u = resize_image(x.to(uint8), 5, 3);
  CHECK(u.dtype() == uint8);
  CHECK(u.at({0, 0, 2}) == 8);   // 8.166667
  CHECK(u.at({0, 1, 2}) == 10);  // 10.033335
  SampleRng r(0, 0, 0);
  CHECK(resize_shorter(4)->apply(coords(1, 6, 9), r).sizes() == Shape{1, 4, 6});
  CHECK(resize_shorter(5)->apply(coords(3, 7, 3), r).sizes() == Shape{3, 11, 5});
  CHECK(resize(3, 2)->apply(coords(1, 6, 9), r).sizes() == Shape{1, 3, 2});
}

TEST_CASE("center_crop rounds offsets half to even like torchvision, pads when larger") {
  SampleRng r(0, 0, 0);
  // (5 - 2) / 2 = 1.5 -> 2, (7 - 2) / 2 = 2.5 -> 2 (Python round).
  Tensor c = center_crop(2, 2)->apply(coords(1, 5, 7), r);
  CHECK(c.to_vector() == std::vector<double>{22, 23, 32, 33});
  Tensor big = center_crop(4, 4)->apply(coords(1, 2, 2), r);  // offset round(-1) = -1
  CHECK(big.to_vector() == std::vector<double>{0, 0, 0, 0, 0, 0, 1, 0, 0, 10, 11, 0, 0, 0, 0, 0});
}

TEST_CASE("random_resized_crop: output size, deterministic per sample, central fallback") {
  Tensor img = coords(3, 40, 60);
  auto t = random_resized_crop(16, 16);
  for (int64_t i = 0; i < 20; ++i) {
    SampleRng r1(3, 1, i), r2(3, 1, i);
    Tensor a = t->apply(img, r1), b = t->apply(img, r2);
    CHECK(a.sizes() == Shape{3, 16, 16});
    CHECK(a.to_vector() == b.to_vector());
  }
  // A scale range no crop can satisfy (area > image) falls back to the central crop of the
  // ratio-clamped image: 40 x 60 has ratio 1.5 > 4/3, so h = 40, w = round(40 * 4/3) = 53,
  // left = (60 - 53) / 2 = 3; resized to 40 x 53 it is that crop exactly.
  auto fb = random_resized_crop(40, 53, 2.0, 3.0);
  SampleRng r(0, 0, 0);
  Tensor f = fb->apply(img, r);
  CHECK(f.at({0, 0, 0}) == 3);
  CHECK(f.at({2, 39, 52}) == 200 + 390 + 55);
}

TEST_CASE("to_float, normalize and compose") {
  Tensor u = empty({2, 1, 2}, uint8);
  uint8_t vals[4] = {0, 255, 51, 102};
  std::memcpy(u.data_ptr(), vals, 4);
  SampleRng r(0, 0, 0);
  Tensor f = to_float()->apply(u, r);
  CHECK(f.dtype() == float32);
  CHECK(f.at({0, 0, 1}) == doctest::Approx(1.0));
  CHECK(f.at({1, 0, 0}) == doctest::Approx(0.2));
  CHECK(to_float()->apply(f, r).at({1, 0, 0}) == doctest::Approx(0.2));  // floats pass through
  auto t = compose({to_float(), normalize({0.5f, 0.2f}, {0.5f, 0.1f})});
  Tensor n = t->apply(u, r);
  CHECK(n.to_vector()[0] == doctest::Approx(-1.0));
  CHECK(n.to_vector()[1] == doctest::Approx(1.0));
  CHECK(n.to_vector()[2] == doctest::Approx(0.0).epsilon(1e-5));
  CHECK(n.to_vector()[3] == doctest::Approx(2.0));
  CHECK(t->describe().find("normalize") != std::string::npos);
  CHECK_THROWS_KILN(normalize({0.5f}, {0.5f})->apply(u, r), "expected float32");
  CHECK_THROWS_KILN(normalize({0.5f, 0.5f, 0.5f}, {1, 1, 1})->apply(f, r), "3 means for an image of 2 channels");
  CHECK_THROWS_KILN(flip_image(empty({4, 4}, float32)), "expected a [C, H, W] image");
}

}  // namespace
}  // namespace kiln
