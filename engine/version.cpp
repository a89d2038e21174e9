// kiln::version() and kiln::build_info() from the configure-time header kiln/build_config.h.
//   ctest --test-dir build -R engine.test_version
#include "engine/version.h"

#include <sstream>

#include "kiln/build_config.h"

namespace kiln {

const char* version() { return KILN_VERSION_STRING; }
int version_major() { return KILN_VERSION_MAJOR; }
int version_minor() { return KILN_VERSION_MINOR; }
int version_patch() { return KILN_VERSION_PATCH; }

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = KILN_VERSION_STRING;
    b.compiler = KILN_BUILD_COMPILER;
    b.build_type = KILN_BUILD_TYPE;
    b.system = KILN_BUILD_SYSTEM;
    b.openmp = KILN_BUILT_WITH_OPENMP;
    b.eigen = KILN_BUILT_WITH_EIGEN;
    b.onednn = KILN_BUILT_WITH_ONEDNN;
    b.mpi = KILN_BUILT_WITH_MPI;
    b.cuda = KILN_BUILT_WITH_CUDA;
    b.cublas = KILN_BUILT_WITH_CUBLAS;
    b.cudnn = KILN_BUILT_WITH_CUDNN;
    b.nccl = KILN_BUILT_WITH_NCCL;
    b.onednn_version = KILN_BUILD_ONEDNN_VERSION;
    b.cuda_version = KILN_BUILD_CUDA_VERSION;
    b.cuda_archs = KILN_BUILD_CUDA_ARCHS;
    b.mpi_version = KILN_BUILD_MPI_VERSION;
    return b;
  }();
  return info;
}

std::string compiled_backends() {
  const BuildInfo& b = build_info();
  std::string s = "ref,native";
  if (b.onednn) s += ",onednn";
  if (b.cuda) s += ",cuda";
  if (b.cudnn) s += ",cudnn";
  return s;
}

std::string build_info_text() {
  const BuildInfo& b = build_info();
  auto yes = [](bool on, const std::string& v) { return on ? (v.empty() ? std::string("yes") : "yes " + v) : "no"; };
  std::ostringstream os;
  os << "kiln " << b.version << " (" << b.build_type << ", " << b.compiler << ", " << b.system << ")\n"
     << "  openmp " << yes(b.openmp, "") << ", eigen " << yes(b.eigen, "") << "\n"
     << "  onednn " << yes(b.onednn, b.onednn_version) << "\n"
     << "  mpi    " << yes(b.mpi, b.mpi_version) << "\n"
     << "  cuda   " << yes(b.cuda, b.cuda_version) << (b.cuda ? " archs " + b.cuda_archs : "") << "\n"
     << "  cublas " << yes(b.cublas, "") << ", cudnn " << yes(b.cudnn, "") << ", nccl " << yes(b.nccl, "") << "\n"
     << "  backends " << compiled_backends() << "\n";
  return os.str();
}

}  // namespace kiln
