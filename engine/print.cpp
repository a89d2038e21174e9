// Tensor printing: PyTorch's _tensor_str (a formatter fitted to the shown values, summarised
// dimensions, wrapped rows, suffixes), so that a user who knows one reads the other.
#include "engine/print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <vector>

#include "engine/autograd.h"
#include "engine/tensor.h"

namespace kiln {

namespace {

std::mutex g_mutex;
PrintOptions g_options;

std::string printf_str(const char* fmt, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

std::string nonfinite_str(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

// The values of a tensor as the printer reads them: float64 for floating types, int64 otherwise
// (exact for every integer kiln stores); booleans print as PyTorch's True and False.
struct Values {
  bool floating = true;
  bool boolean = false;
  std::vector<double> f;
  std::vector<int64_t> i;
};

// PyTorch's _Formatter: one width and one notation for every value shown.
class Formatter {
 public:
  Formatter(const Values& vals, const std::vector<int64_t>& shown, const PrintOptions& o) : o_(o) {
    floating_ = vals.floating;
    if (!floating_) {
      for (int64_t k : shown) width_ = std::max(width_, int_str(vals, k).size());
      return;
    }
    std::vector<double> nz;
    for (int64_t k : shown) {
      const double v = vals.f[size_t(k)];
      if (std::isfinite(v) && v != 0) nz.push_back(v);
    }
    if (nz.empty()) return;  // zeros and non-finite values only: integer mode, width 1
    double lo = std::fabs(nz[0]), hi = lo;
    for (double v : nz) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    const bool wide = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    sci_ = o.sci_mode == PrintOptions::Sci::on || (o.sci_mode == PrintOptions::Sci::automatic && wide);
    for (double v : nz) {
      size_t w;
      if (sci_) w = printf_str("%.*e", o.precision, v).size();
      else if (int_mode_) w = printf_str("%.*f", 0, v).size() + 1;  // the "." that says floating point
      else w = printf_str("%.*f", o.precision, v).size();
      width_ = std::max(width_, w);
    }
  }
  size_t width() const { return width_; }

  static std::string int_str(const Values& vals, int64_t k) {
    const int64_t v = vals.i[size_t(k)];
    return vals.boolean ? (v ? "True" : "False") : std::to_string(v);
  }

  std::string format(const Values& vals, int64_t k) const {
    std::string s;
    if (!floating_) {
      s = int_str(vals, k);
    } else {
      const double v = vals.f[size_t(k)];
      if (!std::isfinite(v)) s = nonfinite_str(v);
      else if (sci_) s = printf_str("%.*e", o_.precision, v);
      else if (int_mode_) s = printf_str("%.*f", 0, v) + ".";
      else s = printf_str("%.*f", o_.precision, v);
    }
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  const PrintOptions& o_;
  bool floating_ = true, int_mode_ = true, sci_ = false;
  size_t width_ = 1;
};

class Printer {
 public:
  Printer(const Values& vals, const Shape& sizes, bool summarize, const PrintOptions& o)
      : vals_(vals), sizes_(sizes), strides_(contiguous_strides(sizes)), summarize_(summarize), o_(o) {}

  // The flat indices of the values shown, in printing order.
  std::vector<int64_t> shown() const {
    std::vector<int64_t> out;
    walk(0, 0, out);
    return out;
  }

  std::string body(const Formatter& f, size_t indent) const { return str(0, 0, indent, f); }

 private:
  bool cut(size_t d) const { return summarize_ && sizes_[d] > 2 * int64_t(o_.edgeitems); }

  // The indices of dimension d that are printed; -1 stands for the ellipsis.
  std::vector<int64_t> rows(size_t d) const {
    std::vector<int64_t> r;
    const int64_t n = sizes_[d], e = o_.edgeitems;
    if (!cut(d)) {
      for (int64_t i = 0; i < n; ++i) r.push_back(i);
      return r;
    }
    for (int64_t i = 0; i < e; ++i) r.push_back(i);
    r.push_back(-1);
    for (int64_t i = n - e; i < n; ++i) r.push_back(i);
    return r;
  }

  void walk(size_t d, int64_t base, std::vector<int64_t>& out) const {
    if (d == sizes_.size()) {
      out.push_back(base);
      return;
    }
    for (int64_t i : rows(d))
      if (i >= 0) walk(d + 1, base + i * strides_[d], out);
  }

  std::string str(size_t d, int64_t base, size_t indent, const Formatter& f) const {
    if (sizes_.empty()) return f.format(vals_, 0);
    if (d + 1 == sizes_.size()) return vector_str(d, base, indent, f);
    std::vector<std::string> slices;
    for (int64_t i : rows(d)) slices.push_back(i < 0 ? "..." : str(d + 1, base + i * strides_[d], indent + 1, f));
    const std::string sep = "," + std::string(sizes_.size() - d - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    for (size_t k = 0; k < slices.size(); ++k) out += (k ? sep : "") + slices[k];
    return out + "]";
  }

  std::string vector_str(size_t d, int64_t base, size_t indent, const Formatter& f) const {
    const size_t element = f.width() + 2;  // the value, its comma and a space
    const int64_t room = int64_t(o_.linewidth) - int64_t(indent);
    const size_t per_line = size_t(std::max<int64_t>(1, room / int64_t(element)));
    std::vector<std::string> data;
    for (int64_t i : rows(d)) data.push_back(i < 0 ? " ..." : f.format(vals_, base + i * strides_[d]));
    std::string out = "[";
    for (size_t k = 0; k < data.size(); ++k) {
      if (k) out += k % per_line ? ", " : ",\n" + std::string(indent + 1, ' ');
      out += data[k];
    }
    return out + "]";
  }

  const Values& vals_;
  const Shape& sizes_;
  const Shape strides_;
  const bool summarize_;
  const PrintOptions& o_;
};

Values read_values(const Tensor& t) {
  Values v;
  v.floating = t.is_floating_point();
  v.boolean = t.dtype() == DType::boolean;
  Tensor host = t.detach().to(Device()).contiguous();
  if (v.floating) {
    Tensor d = host.to(DType::float64).contiguous();
    const double* p = d.data<double>();
    v.f.assign(p, p + d.numel());
  } else {
    Tensor d = host.to(DType::int64).contiguous();
    const int64_t* p = d.data<int64_t>();
    v.i.assign(p, p + d.numel());
  }
  return v;
}

std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

PrintOptions print_options() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_options;
}

void set_print_options(const PrintOptions& o) {
  KILN_CHECK(o.precision >= 0 && o.precision <= 30, "set_print_options: precision must be in [0, 30], got ",
             o.precision);
  KILN_CHECK(o.threshold >= 0, "set_print_options: threshold must be at least 0, got ", o.threshold);
  KILN_CHECK(o.edgeitems >= 0, "set_print_options: edgeitems must be at least 0, got ", o.edgeitems);
  KILN_CHECK(o.linewidth >= 1, "set_print_options: linewidth must be at least 1, got ", o.linewidth);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_options = o;
}

std::string to_string(const Tensor& t, const PrintOptions& o) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const size_t indent = prefix.size();
  std::vector<std::string> suffixes;
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + shape_tuple(t.sizes()));
  } else {
    const Values vals = read_values(t);
    const Printer printer(vals, t.sizes(), t.numel() > o.threshold, o);
    const Formatter f(vals, printer.shown(), o);
    body = printer.body(f, indent);
  }
  // PyTorch names no dtype for its defaults: float32, int64, bool.
  if (t.dtype() != DType::float32 && t.dtype() != DType::int64 && t.dtype() != DType::boolean)
    suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  if (t.grad_fn()) suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  // PyTorch's _add_suffixes: a suffix that would pass the line width starts a line of its own.
  std::string out = prefix + body;
  const size_t nl = out.rfind('\n');
  size_t last = nl == std::string::npos ? out.size() + 2 : out.size() - nl + 1;
  for (const std::string& s : suffixes) {
    if (last + s.size() + 2 > size_t(o.linewidth)) {
      out += ",\n" + std::string(indent, ' ') + s;
      last = indent + s.size();
    } else {
      out += ", " + s;
      last += s.size() + 2;
    }
  }
  return out + ")";
}

std::string to_string(const Tensor& t) { return to_string(t, print_options()); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace kiln
