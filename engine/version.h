// kiln's version and how this copy of the library was built, queryable at run time (a program
// linked against an installed kiln can say which kiln it got). The values come from
// build/include/kiln/build_config.h, which CMake writes at configure time (cmake/KilnInstall.cmake)
// and installs beside the headers; engine/version.cpp is the only library file that reads it.
//   ctest --test-dir build -R engine.test_version
#pragma once

#include <string>

namespace kiln {

// "0.1.0": the project() version of the CMake build.
const char* version();
int version_major();
int version_minor();
int version_patch();

// What was compiled in. Library versions are those seen at configure time ("" when absent).
struct BuildInfo {
  std::string version;
  std::string compiler;     // "GNU 14.2.0"
  std::string build_type;   // "Release"
  std::string system;       // "Linux-6.1 x86_64"
  bool openmp = false;
  bool eigen = false;
  bool onednn = false;
  bool mpi = false;
  bool cuda = false;
  bool cublas = false;
  bool cudnn = false;
  bool nccl = false;
  std::string onednn_version;
  std::string cuda_version;  // toolkit at configure time
  std::string cuda_archs;    // "75;80;86;89;90"
  std::string mpi_version;
};
const BuildInfo& build_info();

// Backends compiled in, in the order a user would name them: "ref,native[,onednn][,cuda][,cudnn]".
std::string compiled_backends();

// A few lines of text: version, compiler, build type, each optional backend and its version.
std::string build_info_text();

}  // namespace kiln
