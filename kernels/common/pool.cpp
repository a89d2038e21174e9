// Pool descriptor strings and PyTorch's pooling output-size rule.
//   tests: ctest --test-dir build -R pool
#include "kernels/common/pool.h"

#include <sstream>

namespace kiln {

std::string PoolDesc::str() const {
  std::ostringstream os;
  os << (alg == PoolAlg::max ? "max_pool2d " : "avg_pool2d ") << dtype_name(dtype) << " src [" << n << ", " << c
     << ", " << ih << ", " << iw << "] dst [" << n << ", " << c << ", " << oh << ", " << ow << "] kernel " << kh
     << "x" << kw << " stride " << sh << "x" << sw << " pad " << ph << "x" << pw;
  if (alg == PoolAlg::max) os << " dilation " << dh << "x" << dw;
  if (ceil_mode) os << " ceil";
  if (nhwc) os << " nhwc";
  if (alg == PoolAlg::avg) {
    if (!count_include_pad) os << " exclude_pad";
    if (divisor_override > 0) os << " divisor " << divisor_override;
  }
  return os.str();
}

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  // div_rtn: division rounding towards -inf, as in ATen (the numerator can be negative).
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t q = num / stride;
  if ((num % stride != 0) && ((num < 0) != (stride < 0))) --q;
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

std::string AdaptivePoolDesc::str() const {
  std::ostringstream os;
  os << (alg == PoolAlg::max ? "adaptive_max_pool2d " : "adaptive_avg_pool2d ") << dtype_name(dtype) << " src [" << n
     << ", " << c << ", " << ih << ", " << iw << "] dst [" << n << ", " << c << ", " << oh << ", " << ow << "]";
  return os.str();
}

std::string LrnDesc::str() const {
  std::ostringstream os;
  os << "local_response_norm " << dtype_name(dtype) << " [" << n << ", " << c << ", " << inner << "] size " << size
     << " alpha " << alpha << " beta " << beta << " k " << k;
  return os.str();
}

}  // namespace kiln
