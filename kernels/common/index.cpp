#include "kernels/common/index.h"

#include <sstream>

namespace kiln {

std::string GatherDesc::str() const {
  std::ostringstream os;
  os << (per_row ? "index_select " : "gather ") << dtype_name(dtype) << " [" << outer << "," << src_n << "->" << idx_n
     << "," << inner << "]";
  return os.str();
}

std::string ScatterDesc::str() const {
  std::ostringstream os;
  os << (per_row ? "index_" : "scatter_") << (accumulate ? "add " : "copy ") << dtype_name(dtype) << " [" << outer
     << "," << idx_n << "->" << dst_n << "," << inner << "]";
  return os.str();
}

std::string WhereDesc::str() const { return std::string("where ") + dtype_name(dtype) + " " + loop.str(); }

std::string SortDesc::str() const {
  std::ostringstream os;
  os << (k == n ? "sort " : "topk ") << (descending ? "descending " : "ascending ") << dtype_name(dtype) << " ["
     << outer << "," << n << "," << inner << "] k=" << k;
  return os.str();
}

std::string ScanDesc::str() const {
  std::ostringstream os;
  os << "cumsum" << (reverse ? " reverse " : " ") << dtype_name(dtype) << " [" << outer << "," << n << "," << inner
     << "]";
  return os.str();
}

}  // namespace kiln
