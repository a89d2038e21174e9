// ImageFolder and the JPEG/PNG decoders. See image_folder.h. libjpeg and libpng report errors by
// calling an error handler that must not return; ours longjmp back to the decode function, which
// then throws. The setjmp frames hold only trivially destructible locals; the pixel buffer lives
// in the caller's frame (longjmp never crosses it), so nothing leaks or skips a destructor.
#include "io/data/image_folder.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "io/formats/file_bytes.h"

namespace kiln {

namespace {

// The stated decode limit (image_folder.h): a header claiming more values is refused before
// anything is decoded or allocated.
constexpr int64_t kMaxPixels = kMaxImageValues;
// Deflate packs at most about 1032 bytes into one, so a PNG's raw rows (with their filter bytes)
// cannot exceed this many times the file: a tiny file claiming a huge image is corrupt.
constexpr int64_t kMaxDeflateRatio = 1032;

// ---- JPEG ----

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) mean corrupt data: libjpeg would fill the rest with gray. Treat them as
// errors, except extraneous bytes before a marker, which real photo collections contain.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code != JWRN_EXTRANEOUS_DATA) jpeg_error_exit(cinfo);
}

struct Decoded {
  std::vector<uint8_t> pixels;  // interleaved H x W x C
  int64_t h = 0, w = 0, c = 0;
};

// Returns false with e.message set on failure.
bool jpeg_decode_c(const uint8_t* data, size_t size, Decoded* out, JpegError* e) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_error_exit;
  e->mgr.emit_message = jpeg_emit_message;
  if (setjmp(e->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(e->message, sizeof e->message, "CMYK JPEG is not supported");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  // Checked before jpeg_start_decompress, which allocates (a progressive file's whole coefficient
  // buffer, 2 bytes per value).
  jpeg_calc_output_dimensions(&cinfo);
  out->h = cinfo.output_height;
  out->w = cinfo.output_width;
  out->c = cinfo.output_components;
  if (out->h * out->w * out->c > kMaxPixels) {
    std::snprintf(e->message, sizeof e->message, "%lldx%lldx%lld image is over the %lld-value limit",
                  (long long)out->h, (long long)out->w, (long long)out->c, (long long)kMaxPixels);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_start_decompress(&cinfo);
  out->pixels.resize(size_t(out->h * out->w * out->c));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->pixels.data() + size_t(cinfo.output_scanline) * out->w * out->c;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// ---- PNG ----

struct PngState {
  const uint8_t* data;
  size_t size, pos;
  jmp_buf jump;
  char message[256];
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", msg);
  std::longjmp(s->jump, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep dst, png_size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) {
    std::snprintf(s->message, sizeof s->message, "truncated at offset %zu (needs %zu more bytes)", s->size, n);
    std::longjmp(s->jump, 1);
  }
  std::memcpy(dst, s->data + s->pos, n);
  s->pos += n;
}

bool png_decode_c(PngState* s, Decoded* out, std::vector<png_bytep>* rows) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, png_error_fn, png_warning_fn);
  if (!png) {
    std::snprintf(s->message, sizeof s->message, "png_create_read_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(s->jump)) {
    if (!info) std::snprintf(s->message, sizeof s->message, "png_create_info_struct failed");
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, s, png_read_fn);
  png_read_info(png, info);
  {
    int64_t h = png_get_image_height(png, info), raw = h * (int64_t(png_get_rowbytes(png, info)) + 1);
    if (raw > kMaxDeflateRatio * int64_t(s->size) + 4096) {
      std::snprintf(s->message, sizeof s->message,
                    "%lldx%lld image needs %lld bytes of rows, more than a %zu-byte file can hold", (long long)h,
                    (long long)png_get_image_width(png, info), (long long)raw, s->size);
      png_destroy_read_struct(&png, &info, nullptr);
      return false;
    }
  }
  png_set_strip_16(png);
  png_set_packing(png);
  png_set_palette_to_rgb(png);
  png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  png_read_update_info(png, info);
  int channels = png_get_channels(png, info);
  if (channels != 1 && channels != 3) {
    std::snprintf(s->message, sizeof s->message, "unexpected %d channels after conversion", channels);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->h = png_get_image_height(png, info);
  out->w = png_get_image_width(png, info);
  out->c = channels;
  if (out->h * out->w * out->c > kMaxPixels) {
    std::snprintf(s->message, sizeof s->message, "%lldx%lldx%lld image is over the %lld-value limit",
                  (long long)out->h, (long long)out->w, (long long)out->c, (long long)kMaxPixels);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  out->pixels.resize(size_t(out->h * out->w * out->c));
  rows->resize(size_t(out->h));
  for (int64_t y = 0; y < out->h; ++y) (*rows)[size_t(y)] = out->pixels.data() + size_t(y * out->w * out->c);
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Tensor to_chw(const Decoded& d) {
  Tensor t = empty({d.c, d.h, d.w}, uint8);
  uint8_t* o = t.data<uint8_t>();
  int64_t hw = d.h * d.w;
  for (int64_t i = 0; i < hw; ++i)
    for (int64_t c = 0; c < d.c; ++c) o[c * hw + i] = d.pixels[size_t(i * d.c + c)];
  return t;
}

Tensor convert_channels(const Tensor& t, int channels, const std::string& name) {
  int64_t c = t.size(0), hw = t.size(1) * t.size(2);
  if (channels == 0 || channels == c) return t;
  const uint8_t* s = t.data<uint8_t>();
  if (channels == 3 && c == 1) {
    Tensor o = empty({3, t.size(1), t.size(2)}, uint8);
    for (int k = 0; k < 3; ++k) std::memcpy(o.data<uint8_t>() + k * hw, s, size_t(hw));
    return o;
  }
  if (channels == 1 && c == 3) {
    Tensor o = empty({1, t.size(1), t.size(2)}, uint8);
    uint8_t* d = o.data<uint8_t>();
    for (int64_t i = 0; i < hw; ++i)
      d[i] = uint8_t((299 * s[i] + 587 * s[hw + i] + 114 * s[2 * hw + i] + 500) / 1000);
    return o;
  }
  KILN_THROW(name, ": cannot convert ", c, " channels to ", channels);
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower((unsigned char)ch));
  return s;
}

}  // namespace

Tensor decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  Decoded d;
  JpegError e{};
  KILN_CHECK(size > 0, name, ": empty file");
  if (!jpeg_decode_c(data, size, &d, &e)) KILN_THROW(name, ": JPEG decoding failed: ", e.message);
  return to_chw(d);
}

Tensor decode_png(const uint8_t* data, size_t size, const std::string& name) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  KILN_CHECK(size >= 8 && std::memcmp(data, sig, 8) == 0, name, ": bad PNG signature at offset 0");
  Decoded d;
  std::vector<png_bytep> rows;
  PngState s{};
  s.data = data;
  s.size = size;
  if (!png_decode_c(&s, &d, &rows)) KILN_THROW(name, ": PNG decoding failed at offset ", s.pos, ": ", s.message);
  return to_chw(d);
}

Tensor decode_image(const std::string& path, int channels) {
  KILN_CHECK(channels == 0 || channels == 1 || channels == 3, "decode_image: channels ", channels,
             " must be 0, 1 or 3");
  std::vector<uint8_t> b = io::read_file_bytes(path);
  return decode_image_bytes(b.data(), b.size(), path, channels);
}

Tensor decode_image_bytes(const uint8_t* b, size_t size, const std::string& name, int channels) {
  KILN_CHECK(channels == 0 || channels == 1 || channels == 3, "decode_image: channels ", channels,
             " must be 0, 1 or 3");
  Tensor t;
  if (size >= 8 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G') t = decode_png(b, size, name);
  else if (size >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) t = decode_jpeg(b, size, name);
  else
    KILN_THROW(name, ": not a JPEG or PNG file (bad signature at offset 0, ", size, " bytes)");
  return convert_channels(t, channels, name);
}

ImageFolder::ImageFolder(const std::string& root, std::vector<std::string> extensions, int channels)
    : root_(root), channels_(channels) {
  namespace fs = std::filesystem;
  KILN_CHECK(channels == 0 || channels == 1 || channels == 3, "ImageFolder: channels ", channels, " must be 0, 1 or 3");
  std::error_code ec;
  KILN_CHECK(fs::is_directory(root, ec), "ImageFolder: ", root, " is not a directory");
  for (std::string& x : extensions) x = lower(x);
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (entry.is_directory()) classes_.push_back(entry.path().filename().string());
  KILN_CHECK(!ec, "ImageFolder: cannot list ", root, ": ", ec.message());
  std::sort(classes_.begin(), classes_.end());
  KILN_CHECK(!classes_.empty(), "ImageFolder: no class folders in ", root);
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(root) / classes_[c], ec)) {
      if (!entry.is_regular_file()) continue;
      std::string ext = lower(entry.path().extension().string());
      if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files) samples_.emplace_back(std::move(f), int64_t(c));
  }
  std::string exts;
  for (const std::string& x : extensions) exts += " " + x;
  KILN_CHECK(!samples_.empty(), "ImageFolder: no images (", exts, " ) under ", root);
}

Example ImageFolder::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "ImageFolder::get: index ", index, " out of range [0, ", size(), ")");
  const auto& [path, label] = samples_[size_t(index)];
  Tensor y = empty(Shape{}, int64);
  *y.data<int64_t>() = label;
  return {decode_image(path, channels_), y};
}

std::string ImageFolder::source(int64_t index) const {
  return index >= 0 && index < size() ? samples_[size_t(index)].first : std::string();
}

}  // namespace kiln
