// Reading KILN_* environment variables with their values checked: a value outside the documented
// set is a kiln::Error naming the variable, the value and the valid ones (docs/environment.md),
// never silently read as the default. Unset and empty mean the default. Lives at the lowest
// floor because kernels read variables too.
//   ctest --test-dir build -R engine.test_env
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace kiln {

// One of `valid` ("" when unset or empty); otherwise "NAME='v' is not one of: a, b".
std::string env_choice(const char* name, std::initializer_list<const char*> valid);
// "0" = false, "1" = true, unset or empty = `fallback`; anything else is an error.
bool env_flag(const char* name, bool fallback);
// A whole decimal number in [lo, hi]; unset or empty = `fallback`; anything else is an error.
int64_t env_int(const char* name, int64_t lo, int64_t hi, int64_t fallback);

}  // namespace kiln
