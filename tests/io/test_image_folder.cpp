// ImageFolder and the JPEG/PNG decoders (io/data/image_folder.h). The test writes its own images with
// libjpeg and libpng (gray, RGB, RGBA, 16-bit, palette PNG; gray and RGB JPEG), then truncated
// and garbage files, which must throw kiln::Error naming the file, never crash or exit.
//   ctest --test-dir build -R test_image_folder
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <jpeglib.h>
#include <png.h>
#include <unistd.h>

#include "io/data/dataloader.h"
#include "io/data/datasets.h"
#include "io/data/image_folder.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  static test::TempDir dir("imgfolder");
  return dir.path.string();
}

// Pixel (y, x, c) of the test pattern.
uint8_t pattern(int y, int x, int c) { return uint8_t((y * 16 + x * 5 + c * 70) & 0xFF); }

// color_type: PNG_COLOR_TYPE_GRAY/RGB/RGB_ALPHA/PALETTE; depth 8 or 16.
void write_png(const std::string& path, int w, int h, int color_type, int depth) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, depth, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_color pal[4] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {10, 20, 30}};
    png_set_PLTE(png, info, pal, 4);
  }
  png_write_info(png, info);
  int ch = color_type == PNG_COLOR_TYPE_GRAY ? 1 : color_type == PNG_COLOR_TYPE_RGB ? 3
           : color_type == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 1;
  int bps = depth / 8;
  std::vector<uint8_t> row(size_t(w * ch * bps));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < ch; ++c) {
        uint8_t v = color_type == PNG_COLOR_TYPE_PALETTE ? uint8_t((x + y) % 4) : pattern(y, x, c);
        if (c == 3) v = 128;  // alpha
        if (bps == 2) {
          row[size_t((x * ch + c) * 2)] = v;        // big-endian high byte
          row[size_t((x * ch + c) * 2 + 1)] = 0x7F;  // low byte dropped by strip_16
        } else {
          row[size_t(x * ch + c)] = v;
        }
      }
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

void write_jpeg(const std::string& path, int w, int h, int channels) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(size_t(w * channels));
  for (int y = 0; y < h; ++y) {
    // Smooth content so quality 100 reproduces it within a few levels.
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < channels; ++k) row[size_t(x * channels + k)] = uint8_t(40 + 4 * x + 3 * y + 30 * k);
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

std::vector<uint8_t> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

TEST_CASE("PNG decoding: gray, RGB, RGBA -> RGB, 16-bit -> 8-bit, palette") {
  std::string d = temp_dir();
  write_png(d + "/g.png", 5, 3, PNG_COLOR_TYPE_GRAY, 8);
  write_png(d + "/rgb.png", 5, 3, PNG_COLOR_TYPE_RGB, 8);
  write_png(d + "/rgba.png", 5, 3, PNG_COLOR_TYPE_RGB_ALPHA, 8);
  write_png(d + "/rgb16.png", 5, 3, PNG_COLOR_TYPE_RGB, 16);
  write_png(d + "/pal.png", 5, 3, PNG_COLOR_TYPE_PALETTE, 8);
  Tensor g = decode_image(d + "/g.png");
  CHECK(g.sizes() == Shape{1, 3, 5});
  CHECK(g.at({0, 2, 4}) == pattern(2, 4, 0));
  for (const char* f : {"/rgb.png", "/rgba.png", "/rgb16.png"}) {
    Tensor t = decode_image(d + f);
    CHECK(t.sizes() == Shape{3, 3, 5});
    CHECK(t.dtype() == uint8);
    bool ok = true;
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 5; ++x)
        for (int c = 0; c < 3; ++c) ok = ok && t.at({c, y, x}) == pattern(y, x, c);
    CHECK_MESSAGE(ok, f);
  }
  Tensor p = decode_image(d + "/pal.png");
  CHECK(p.sizes() == Shape{3, 3, 5});
  CHECK(p.at({0, 0, 1}) == 255);  // palette entry 1: red
  CHECK(p.at({2, 1, 2}) == 30);   // (1 + 2) % 4 = 3: (10, 20, 30)
  // Channel conversion: gray -> RGB replicates, RGB -> gray is luma.
  Tensor g3 = decode_image(d + "/g.png", 3);
  CHECK(g3.sizes() == Shape{3, 3, 5});
  CHECK(g3.at({2, 1, 1}) == pattern(1, 1, 0));
  Tensor l = decode_image(d + "/rgb.png", 1);
  int r = pattern(0, 1, 0), gg = pattern(0, 1, 1), b = pattern(0, 1, 2);
  CHECK(l.at({0, 0, 1}) == (299 * r + 587 * gg + 114 * b + 500) / 1000);
}

TEST_CASE("JPEG decoding: gray and RGB within a few levels of the source") {
  std::string d = temp_dir();
  write_jpeg(d + "/g.jpg", 16, 8, 1);
  write_jpeg(d + "/c.jpg", 16, 8, 3);
  Tensor g = decode_image(d + "/g.jpg");
  CHECK(g.sizes() == Shape{1, 8, 16});
  CHECK(std::abs(g.at({0, 5, 7}) - (40 + 28 + 15)) <= 2);
  Tensor c = decode_image(d + "/c.jpg");
  CHECK(c.sizes() == Shape{3, 8, 16});
  for (int k = 0; k < 3; ++k) CHECK(std::abs(c.at({k, 3, 10}) - (40 + 40 + 9 + 30 * k)) <= 4);
}

TEST_CASE("truncated and garbage images throw kiln::Error naming the file") {
  std::string d = temp_dir();
  write_jpeg(d + "/c.jpg", 32, 32, 3);
  write_png(d + "/rgb.png", 32, 32, PNG_COLOR_TYPE_RGB, 8);
  std::vector<uint8_t> jpg = read_all(d + "/c.jpg"), png = read_all(d + "/rgb.png");
  for (size_t cut : {size_t(3), size_t(20), jpg.size() / 2, jpg.size() - 2}) {
    write_all(d + "/cut.jpg", std::vector<uint8_t>(jpg.begin(), jpg.begin() + long(cut)));
    CHECK_THROWS_KILN(decode_image(d + "/cut.jpg"), "cut.jpg: JPEG decoding failed");
  }
  for (size_t cut : {size_t(8), size_t(20), png.size() / 2, png.size() - 5}) {
    write_all(d + "/cut.png", std::vector<uint8_t>(png.begin(), png.begin() + long(cut)));
    CHECK_THROWS_KILN(decode_image(d + "/cut.png"), "cut.png: PNG decoding failed");
  }
  std::vector<uint8_t> bad = png;
  for (size_t i = 40; i < 60; ++i) bad[i] ^= 0x55;  // inside IDAT: CRC error
  write_all(d + "/bad.png", bad);
  CHECK_THROWS_KILN(decode_image(d + "/bad.png"), "bad.png: PNG decoding failed");
  bad = jpg;
  bad[2] = 0x00;  // not a marker
  write_all(d + "/bad.jpg", bad);
  CHECK_THROWS_KILN(decode_image(d + "/bad.jpg"), "bad.jpg: not a JPEG or PNG file");
  std::vector<uint8_t> garbage = {0xFF, 0xD8, 0xFF};
  for (int i = 0; i < 200; ++i) garbage.push_back(uint8_t(i * 37));
  write_all(d + "/garbage.jpg", garbage);
  CHECK_THROWS_KILN(decode_image(d + "/garbage.jpg"), "garbage.jpg: JPEG decoding failed");
  write_all(d + "/empty.png", {});
  CHECK_THROWS_KILN(decode_image(d + "/empty.png"), "empty.png: not a JPEG or PNG file");
  CHECK_THROWS_KILN(decode_image(d + "/missing.png"), "missing.png");
}

TEST_CASE("ImageFolder: sorted classes and samples; a corrupt file fails in the loader by sample") {
  std::string root = temp_dir() + "/tree";
  for (const char* split : {"train", "val"})
    for (const char* cls : {"zebra", "ant", "cat"}) fs::create_directories(root + "/" + split + "/" + cls);
  write_png(root + "/train/zebra/b.png", 10, 12, PNG_COLOR_TYPE_RGB, 8);
  write_jpeg(root + "/train/zebra/a.JPG", 12, 10, 3);
  write_png(root + "/train/ant/x.png", 9, 9, PNG_COLOR_TYPE_GRAY, 8);
  write_jpeg(root + "/train/cat/c.jpeg", 20, 16, 3);
  std::ofstream(root + "/train/cat/notes.txt") << "not an image";
  write_png(root + "/val/ant/v.png", 8, 8, PNG_COLOR_TYPE_RGB, 8);
  write_png(root + "/val/cat/v.png", 8, 8, PNG_COLOR_TYPE_RGB, 8);
  write_png(root + "/val/zebra/v.png", 8, 8, PNG_COLOR_TYPE_RGB, 8);

  ImageFolder f(root + "/train");
  CHECK(f.classes() == std::vector<std::string>{"ant", "cat", "zebra"});
  REQUIRE(f.size() == 4);
  CHECK(fs::path(f.path(0)).filename() == "x.png");
  CHECK(f.label(0) == 0);
  CHECK(fs::path(f.path(2)).filename() == "a.JPG");
  CHECK(f.label(3) == 2);
  Example e = f.get(0);
  CHECK(e.input.sizes() == Shape{3, 9, 9});  // gray -> RGB by default
  CHECK(e.target.item() == 0);
  CHECK(f.get(3).input.sizes() == Shape{3, 12, 10});

  Splits s = open_dataset_dir(root);
  CHECK(s.name == "imagenet");
  CHECK(s.sample_shape == Shape{3, 224, 224});
  CHECK(s.classes == 3);
  CHECK(s.test->size() == 3);
  DataLoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  o.workers = 1;
  DataLoader dl(s.train, o, compose({resize(8, 8), to_float()}));
  dl.start_epoch(0);
  Batch b;
  REQUIRE(dl.next(b));
  CHECK(b.input.sizes() == Shape{2, 3, 8, 8});
  CHECK(b.input.dtype() == float32);
  // Valid transforms on the ImageNet recipe give 224 x 224.
  DataLoader dv(s.test, o, s.default_transform(false));
  dv.start_epoch(0);
  REQUIRE(dv.next(b));
  CHECK(b.input.sizes() == Shape{2, 3, 224, 224});

  write_all(root + "/train/cat/c.jpeg", {0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 'J', 'F'});
  dl.start_epoch(0);
  CHECK_THROWS_KILN(dl.next(b), "sample 1 (" + root + "/train/cat/c.jpeg) (batch 0, epoch 0):");
  CHECK(dl.next(b));  // batch 1 (a.JPG, b.png) is fine
  CHECK_THROWS_KILN(f.get(1), "c.jpeg: JPEG decoding failed");
  CHECK_THROWS_KILN(ImageFolder(root + "/train", {".bmp"}), "no images ( .bmp )");

  // A transform's error (here the validation resize of a 65000 x 1 image, bounded) names the file.
  fs::create_directories(root + "/thin/a");
  write_png(root + "/thin/a/wide.png", 65000, 1, PNG_COLOR_TYPE_RGB, 8);
  auto thin = std::make_shared<ImageFolder>(root + "/thin");
  DataLoader dt(thin, o, s.default_transform(false));
  dt.start_epoch(0);
  CHECK_THROWS_KILN(dt.next(b), "sample 0 (" + root + "/thin/a/wide.png) (batch 0, epoch 0): resize_shorter(256)");
}

}  // namespace
}  // namespace kiln
