// Issue 18: KILN_* variables are read with their values checked (kernels/common/env.h): a value
// outside the documented set is an error naming the variable, the value and the valid ones, never
// silently the default. The CLI's side (KILN_NUM_THREADS=8x, KILN_FUSE=yes, ...): cli.bad_args.
//   ctest --test-dir build -R engine.test_env
#include "tests/support/testing.h"

#include <cstdlib>

#include "kernels/common/env.h"

using namespace kiln;

namespace {

// Sets a variable for one scope.
struct EnvVar {
  const char* name;
  EnvVar(const char* n, const char* value) : name(n) {
    if (value) ::setenv(n, value, 1);
    else ::unsetenv(n);
  }
  ~EnvVar() { ::unsetenv(name); }
};

}  // namespace

TEST_CASE("env_choice, env_flag and env_int accept their values and name a bad one") {
  const char* kName = "KILN_TEST_ENV_VALUE";
  {
    EnvVar v(kName, nullptr);
    CHECK(env_choice(kName, {"direct", "caching"}).empty());
    CHECK(env_flag(kName, true));
    CHECK_FALSE(env_flag(kName, false));
    CHECK(env_int(kName, 1, 8, 5) == 5);
  }
  {
    EnvVar v(kName, "");
    CHECK(env_choice(kName, {"direct", "caching"}).empty());
    CHECK(env_int(kName, 1, 8, 5) == 5);
  }
  {
    EnvVar v(kName, "direct");
    CHECK(env_choice(kName, {"direct", "caching"}) == "direct");
    CHECK_THROWS_KILN(env_flag(kName, true), "KILN_TEST_ENV_VALUE='direct' is not one of: 0, 1 (or unset)");
  }
  {
    EnvVar v(kName, "Direct");
    CHECK_THROWS_KILN(env_choice(kName, {"direct", "caching"}),
                      "KILN_TEST_ENV_VALUE='Direct' is not one of: direct, caching (or unset)");
  }
  for (const char* on : {"1"}) {
    EnvVar v(kName, on);
    CHECK(env_flag(kName, false));
  }
  for (const char* bad : {"yes", "true", "on", "01", " 1"}) {
    EnvVar v(kName, bad);
    CHECK_THROWS_KILN(env_flag(kName, false), std::string("KILN_TEST_ENV_VALUE='") + bad + "' is not one of: 0, 1");
  }
  {
    EnvVar v(kName, "8");
    CHECK(env_int(kName, 1, 8, 5) == 8);
  }
  for (const char* bad : {"0", "9", "8x", "-1", "x", "99999999999999999999999", "1e3"}) {
    EnvVar v(kName, bad);
    CHECK_THROWS_KILN(env_int(kName, 1, 8, 5),
                      std::string("KILN_TEST_ENV_VALUE='") + bad + "' is not a whole number in [1, 8] (or unset)");
  }
}
