// ConvDesc printing (oneDNN-style problem strings) and parsing. Test: ctest --test-dir build -R kernels.test_conv
#include "kernels/common/conv.h"

#include <cctype>
#include <map>
#include <sstream>

#include "kernels/common/error.h"

namespace kiln {

std::string ConvDesc::problem() const {
  std::ostringstream os;
  os << "mb" << N << "ic" << C << "ih" << H << "iw" << W << "oc" << K << "oh" << P << "ow" << Q << "kh" << R << "kw"
     << S << "sh" << stride_h << "sw" << stride_w << "ph" << pad_h << "pw" << pad_w << "dh" << dilation_h << "dw"
     << dilation_w << "g" << groups;
  return os.str();
}

std::string ConvDesc::str() const { return std::string(dtype_name(dtype)) + " " + problem() + (has_bias ? "" : " nobias") + (nhwc ? " nhwc" : "") + (sum ? " sum" : "") +
                                    (relu ? " relu" : ""); }

void ConvDesc::set_output_size() {
  P = conv_output_size(H, R, stride_h, pad_h, dilation_h);
  Q = conv_output_size(W, S, stride_w, pad_w, dilation_w);
}

ConvDesc parse_conv_problem(const std::string& s, DType dtype, bool has_bias) {
  static const char* keys[] = {"mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw",
                               "sh", "sw", "ph", "pw", "dh", "dw", "g"};
  std::map<std::string, int64_t> f;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
    size_t k = j;
    while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
    const std::string key = s.substr(i, j - i);
    bool known = false;
    for (const char* kk : keys) known = known || key == kk;
    KILN_CHECK(known && k > j, "parse_conv_problem: bad field '", s.substr(i, k - i), "' in '", s, "'");
    f[key] = std::stoll(s.substr(j, k - j));
    i = k;
  }
  auto get = [&](const char* key, int64_t def) { return f.count(key) ? f[key] : def; };
  KILN_CHECK(f.count("ic") && f.count("oc") && f.count("ih") && f.count("kh"),
             "parse_conv_problem: '", s, "' needs at least ic, oc, ih and kh");
  ConvDesc d;
  d.dtype = dtype;
  d.has_bias = has_bias;
  d.N = get("mb", 2);
  d.C = f["ic"];
  d.K = f["oc"];
  d.H = f["ih"];
  d.W = get("iw", d.H);
  d.R = f["kh"];
  d.S = get("kw", d.R);
  d.stride_h = get("sh", 1);
  d.stride_w = get("sw", d.stride_h);
  d.pad_h = get("ph", 0);
  d.pad_w = get("pw", d.pad_h);
  d.dilation_h = get("dh", 1);
  d.dilation_w = get("dw", d.dilation_h);
  d.groups = get("g", 1);
  d.set_output_size();
  if (f.count("oh")) d.P = f["oh"];
  d.Q = f.count("ow") ? f["ow"] : (f.count("oh") && d.W == d.H && d.S == d.R ? d.P : d.Q);
  KILN_CHECK(d.groups > 0 && d.C % d.groups == 0 && d.K % d.groups == 0 && d.P > 0 && d.Q > 0 && d.stride_h > 0 &&
                 d.stride_w > 0 && d.dilation_h > 0 && d.dilation_w > 0,
             "parse_conv_problem: inconsistent problem '", s, "' (", d.problem(), ")");
  return d;
}

}  // namespace kiln
