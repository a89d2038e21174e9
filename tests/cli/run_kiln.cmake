# Runs a program (the `kiln` binary, or mpirun, or a test program) as a CTest test and checks its
# exit code, its output and, optionally, a file it must write. Invoked as
#   cmake -DKILN=<program> "-DARGS=bench;--model;nope" -DEXPECT_RC=1 "-DEXPECT_REGEX=known: mnist-cnn"
#         [-DEXPECT_FILE=<path>] [-DNEEDS=<path> "-DNEEDS_HINT=what installs it"] -P run_kiln.cmake
# (CTest's own PASS_REGULAR_EXPRESSION ignores the exit code, WILL_FAIL accepts any failure.)
# EMULATOR: a command list the program runs under (qemu-user in a cross build: KILN_TEST_EMULATOR of
# tests/CMakeLists.txt); empty or unset, the program runs directly.
# NEEDS: a file the run depends on (a data set). Where it is missing the script prints
# "SKIPPED: <path> not found (<hint>)" and the test is Skipped (SKIP_REGULAR_EXPRESSION, set by
# tests/CMakeLists.txt); with CI=true in the environment it fails instead (CI installs it).
if(DEFINED NEEDS AND NOT "${NEEDS}" STREQUAL "" AND NOT EXISTS "${NEEDS}")
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "MISSING (required with CI=true): ${NEEDS} not found (${NEEDS_HINT})")
  endif()
  message("SKIPPED: ${NEEDS} not found (${NEEDS_HINT})")
  return()
endif()
if(EXPECT_FILE)
  file(REMOVE "${EXPECT_FILE}")
endif()
execute_process(COMMAND ${EMULATOR} "${KILN}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
list(JOIN ARGS " " shown)
message("${KILN} ${shown}\n--- stdout\n${out}--- stderr\n${err}--- exit code ${rc}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}")
endif()
if(DEFINED EXPECT_REGEX AND NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'")
endif()
if(EXPECT_FILE AND NOT EXISTS "${EXPECT_FILE}")
  message(FATAL_ERROR "${EXPECT_FILE} was not written")
endif()
