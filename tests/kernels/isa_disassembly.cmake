# kernels.isa_disassembly (tests/kernels/isa.cmake): compiles each ISA file of the native kernels
# the way its CPUs need it and checks the disassembly for that ISA's vector FMA, so a micro-kernel
# that silently fell back to scalar or narrower code fails here, on any machine, without running
# it. On x86-64 the AVX-512 files are compiled with -march=knl: that they compile at all proves
# they use nothing Knights Landing lacks (AVX-512 BW, VL, DQ); the build itself gives them
# -mavx512f alone (CMakeLists.txt).
#   cmake -DCXX=g++ -DOBJDUMP=objdump -DARCH=x86_64 -DSRC=. -DOUT=/tmp/isa -P tests/kernels/isa_disassembly.cmake
foreach(v CXX OBJDUMP ARCH SRC OUT)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "isa_disassembly: -D${v}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUT})

set(failures 0)
# check(file flags regex min what): compiles SRC/kernels/cpu/native/<file> with <flags> and counts
# the disassembly lines matching <regex>; fewer than <min> is a failure.
function(check file flags regex min what)
  get_filename_component(stem ${file} NAME_WE)
  set(obj ${OUT}/${stem}${ARGN}.o)
  separate_arguments(flag_list UNIX_COMMAND "${flags}")
  execute_process(COMMAND ${CXX} -std=c++17 -O3 -DNDEBUG ${flag_list} -I${SRC} -c ${SRC}/kernels/cpu/native/${file}
                          -o ${obj}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "${file} (${flags}): does not compile:\n${err}")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${obj} OUTPUT_VARIABLE dis RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} -d ${obj} failed")
  endif()
  string(REGEX MATCHALL "${regex}" hits "${dis}")
  list(LENGTH hits count)
  set(sample "")
  if(count GREATER 0)
    list(GET hits 0 sample)
  endif()
  if(count LESS ${min})
    message(SEND_ERROR "${file} (${flags}): ${count} ${what} instructions, at least ${min} expected")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  else()
    message(STATUS "${file} (${flags}): ${count} ${what} instructions, e.g. '${sample}'")
  endif()
endfunction()

# Each micro-kernel set has one kernel per edge height: the full-height ones alone hold
# MR x (NR / lanes) FMAs per k step, so the minimum below is one k step of every height's kernel.
if(ARCH MATCHES "^(x86_64|AMD64|amd64)$")
  # 12 x 32 tile: 2 zmm FMAs per row and k step; heights 1..12 in two A modes: 2 * 78 * 2.
  check(gemm_avx512.cpp "-march=knl" "vfmadd[0-9]+ps[^\n]*%zmm" 312 "AVX-512 (zmm) FMA" _knl)
  check(gemm_avx512.cpp "-mavx512f -mfma -mavx2" "vfmadd[0-9]+ps[^\n]*%zmm" 312 "AVX-512 (zmm) FMA")
  # bfloat16 12 x 32 tile: 2 zmm vdpbf16ps per row and k pair; heights 1..12 in two A modes: 2 * 78 * 2.
  check(gemm_bf16_avx512bf16.cpp "-mavx512f -mavx512bf16 -mavx512bw -mavx512vl -mfma -mavx2" "vdpbf16ps[^\n]*%zmm" 312
        "AVX512_BF16 (zmm) dot product")
  check(conv_depthwise_avx512.cpp "-march=knl" "v(fmadd[0-9]+|mul|add)ps[^\n]*%zmm" 8 "AVX-512 (zmm) arithmetic" _knl)
  # Direct convolution: three tile sets (forward, backward-weights, its transpose), each 2 zmm
  # FMAs per row of heights 1..12 and reduction step: 3 * 2 * 78.
  check(conv_direct_avx512.cpp "-march=knl" "vfmadd[0-9]+ps[^\n]*%zmm" 468 "AVX-512 (zmm) FMA" _knl)
  # bfloat16 direct convolution tile: 2 zmm vdpbf16ps per row of heights 1..12 and pair: 2 * 78.
  check(conv_direct_avx512bf16.cpp "-mavx512f -mavx512bf16 -mavx512bw -mavx512vl -mfma -mavx2" "vdpbf16ps[^\n]*%zmm" 156
        "AVX512_BF16 (zmm) dot product")
  # The recurrent gate passes (rnn_gates_kernels.inc): every loop vectorised; 475 zmm / ymm
  # arithmetic instructions with GCC 12 at -O3, the bound a third of that.
  check(rnn_gates_avx512.cpp "-march=knl" "v(fmadd[0-9]+|mul|add|sub|div|max|min)ps[^\n]*%zmm" 150
        "AVX-512 (zmm) arithmetic" _knl)
  check(rnn_gates_avx2.cpp "-mavx2 -mfma" "v(fmadd[0-9]+|mul|add|sub|div|max|min)ps[^\n]*%ymm" 150
        "AVX2 (ymm) arithmetic")
  # 6 x 16 tile: 2 ymm FMAs per row and k step; heights 1..6 in two A modes: 2 * 21 * 2.
  check(gemm_avx2.cpp "-mavx2 -mfma" "vfmadd[0-9]+ps[^\n]*%ymm" 84 "AVX2 (ymm) FMA")
  check(conv_depthwise_avx2.cpp "-mavx2 -mfma" "v(fmadd[0-9]+|mul|add)ps[^\n]*%ymm" 8 "AVX2 (ymm) arithmetic")
  # Direct convolution: three tile sets of heights 1..6, 2 ymm FMAs per row: 3 * 2 * 21.
  check(conv_direct_avx2.cpp "-mavx2 -mfma" "vfmadd[0-9]+ps[^\n]*%ymm" 126 "AVX2 (ymm) FMA")
elseif(ARCH MATCHES "^(ppc64le|powerpc64le)$")
  # 8 x 16 tile: 4 VSX FMAs per row and k step; heights 1..8 in two A modes: 4 * 36 * 2.
  check(gemm_vsx.cpp "-mcpu=power8" "xvmadd[am]sp" 288 "VSX single-precision FMA")
elseif(ARCH MATCHES "^(aarch64|arm64)$")
  # 8 x 12 tile: 3 NEON FMAs per row and k step; heights 1..8 in two A modes: 3 * 36 * 2. The
  # packed mode uses the by-element form (v.s[lane]).
  check(gemm_neon.cpp "" "fmla\tv[0-9]+\\.4s, v[0-9]+\\.4s, v[0-9]+\\.s\\[[0-3]\\]" 108 "NEON by-element FMA")
  check(gemm_neon.cpp "" "fmla\tv[0-9]+\\.4s, v[0-9]+\\.4s, v" 216 "NEON FMA (either form)" _all)
  # 8 x (2 vectors) tile, instantiated for 256- and 512-bit vectors: 2 FMAs per row and k step,
  # heights 1..8, two A modes, two lengths: 2 * 36 * 2 * 2 (half by element).
  check(gemm_sve.cpp "-march=armv8.2-a+sve" "fmla\tz[0-9]+\\.s, z[0-9]+\\.s, z[0-9]+\\.s\\[[0-3]\\]" 144
        "SVE by-element FMA")
  check(gemm_sve.cpp "-march=armv8.2-a+sve" "f(mla|mad)\tz[0-9]+\\.s, " 288 "SVE FMA (either form)" _all)
  check(conv_depthwise_sve.cpp "-march=armv8.2-a+sve" "f(mla|mad|mul|add)\tz[0-9]+\\.s" 8 "SVE arithmetic")
else()
  message(STATUS "isa_disassembly: no ISA kernels for ${ARCH}")
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "isa_disassembly: ${failures} check(s) failed")
endif()
