// kiln::version() and kiln::build_info() (engine/version.h) against the configure-time header.
//   ctest --test-dir build -R engine.test_version
#include <doctest/doctest.h>

#include <string>

#include "engine/version.h"
#include "kiln/build_config.h"

TEST_CASE("version: the project version, in parts and as text") {
  CHECK(std::string(kiln::version()) == KILN_VERSION_STRING);
  CHECK(std::string(kiln::version()) ==
        std::to_string(kiln::version_major()) + "." + std::to_string(kiln::version_minor()) + "." +
            std::to_string(kiln::version_patch()));
  CHECK(kiln::version_major() == 0);
  CHECK(kiln::version_minor() >= 1);
}

TEST_CASE("build_info: backends compiled in, matching the build's own macros") {
  const kiln::BuildInfo& b = kiln::build_info();
  CHECK(b.version == kiln::version());
  CHECK(!b.compiler.empty());
  CHECK(!b.build_type.empty());
#ifdef KILN_HAVE_CUDA
  CHECK(b.cuda);
  CHECK(!b.cuda_archs.empty());
#else
  CHECK_FALSE(b.cuda);
#endif
#ifdef KILN_HAVE_MPI
  CHECK(b.mpi);
#else
  CHECK_FALSE(b.mpi);
#endif
#ifdef KILN_HAVE_ONEDNN
  CHECK(b.onednn);
  CHECK(kiln::compiled_backends().find("onednn") != std::string::npos);
#else
  CHECK_FALSE(b.onednn);
#endif
  CHECK(kiln::compiled_backends().rfind("ref,native", 0) == 0);
  const std::string text = kiln::build_info_text();
  CHECK(text.find("kiln " + b.version) == 0);
  CHECK(text.find("backends ") != std::string::npos);
}
