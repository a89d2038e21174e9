# bench.peak_disassembly (tests/CMakeLists.txt): the peak loops of bench/harness/peak_<isa>.cpp,
# compiled with the flags bench/CMakeLists.txt gives them, hold one vector multiply-add per
# accumulator chain, so a loop the compiler turned scalar, narrower or shorter fails here on any
# x86-64 machine without running it. Elsewhere the loops compile to absent paths: the test says
# "SKIPPED" (CTest's SKIP_REGULAR_EXPRESSION reports it Skipped, not Passed).
#   cmake -DCXX=g++ -DOBJDUMP=objdump -DARCH=x86_64 -DSRC=. -DOUT=/tmp/peak -P tests/bench/peak_disassembly.cmake
foreach(v CXX OBJDUMP ARCH SRC OUT)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "peak_disassembly: -D${v}=... is required")
  endif()
endforeach()
if(NOT ARCH MATCHES "^(x86_64|AMD64|amd64)$")
  message("SKIPPED: peak_disassembly: no x86-64 loops to check on ${ARCH} (the AVX loops compile to absent paths)")
  return()
endif()
file(MAKE_DIRECTORY ${OUT})

set(failures 0)
# check(file flags regex min what): <min> disassembly lines of SRC/bench/harness/<file> must match.
function(check file flags regex min what)
  get_filename_component(stem ${file} NAME_WE)
  separate_arguments(flag_list UNIX_COMMAND "${flags}")
  execute_process(COMMAND ${CXX} -std=c++17 -O3 -DNDEBUG ${flag_list} -I${SRC} -c ${SRC}/bench/harness/${file}
                          -o ${OUT}/${stem}.o RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${file} (${flags}): does not compile:\n${err}")
  endif()
  execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${OUT}/${stem}.o OUTPUT_VARIABLE dis RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} -d ${OUT}/${stem}.o failed")
  endif()
  string(REGEX MATCHALL "${regex}" hits "${dis}")
  list(LENGTH hits count)
  if(count LESS ${min})
    message(SEND_ERROR "${file} (${flags}): ${count} ${what} instructions, at least ${min} expected")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  else()
    message(STATUS "${file} (${flags}): ${count} ${what} instructions")
  endif()
endfunction()

# The counts are the accumulator chains of peak_kernels.h (one step of each).
check(peak_avx512.cpp "-mavx512f -mfma -mavx2" "vfmadd[0-9]+ps[^\n]*%zmm" 16 "AVX-512 (zmm) FMA")
check(peak_avx512_bf16.cpp "-mavx512f -mavx512bf16" "vdpbf16ps[^\n]*%zmm" 16 "AVX512_BF16 (zmm) dot product")
check(peak_avx2.cpp "-mavx2 -mfma" "vfmadd[0-9]+ps[^\n]*%ymm" 12 "AVX2 (ymm) FMA")
if(failures GREATER 0)
  message(FATAL_ERROR "${failures} peak loop(s) lack their vector multiply-adds")
endif()
