# Includes point down, checked by the compiler (cmake/KilnFloors.cmake): builds every probe of an
# upward include (one per pair of floors: floor F's usage requirements, a header of a floor above)
# and expects each to fail on exactly that header, then builds the top floor's probe of every
# floor plus the generated header and expects it to compile.
#   cmake -DBUILD=<build dir> "-DPROBES=<target>:<header>;..." -P cmake/KilnFloorsCheck.cmake
#   ctest --test-dir build -R floors.upward_includes
foreach(v BUILD PROBES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "KilnFloorsCheck: -D${v}= is required")
  endif()
endforeach()

set(failures 0)
foreach(entry ${PROBES})
  string(REPLACE ":" ";" entry "${entry}")
  list(GET entry 0 target)
  list(GET entry 1 header)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD} --target ${target}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX MATCH "${header}[^\n]*(No such file|not found)" missing "${out}")
  if(rc EQUAL 0)
    message(SEND_ERROR "${target}: an include of ${header} compiled: the floor sees a floor above it")
    math(EXPR failures "${failures} + 1")
  elseif(NOT missing)
    message(SEND_ERROR "${target}: failed, but not on a missing ${header}:\n${out}")
    math(EXPR failures "${failures} + 1")
  else()
    message(STATUS "${target}: ${header} not visible, as it should be")
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD} --target kiln_floor_probe_ok
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(SEND_ERROR "kiln_floor_probe_ok: the top floor does not see every floor:\n${out}")
  math(EXPR failures "${failures} + 1")
endif()
list(LENGTH PROBES n)
if(failures)
  message(FATAL_ERROR "floors: ${failures} check(s) failed")
endif()
message(STATUS "floors: ${n} upward includes fail to compile; the top floor sees every floor")
