# The ISA checks of issue 17 (kernels/cpu/native/cpu_features.h), included by tests/CMakeLists.txt.
#
# kernels.isa_cap_<level>: the kernel tests again with KILN_CPU_ISA capping every kernel choice
# (oneDNN's included) at each level of the build's architecture below the best one, which the
# plain runs cover. test_cpu_isa's last case checks the cap took effect.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(kiln_isa_caps avx2 portable)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(kiln_isa_caps neon portable)
else()
  set(kiln_isa_caps portable)
endif()
set(kiln_isa_cap_files
    "*kernels/test_cpu_isa.cpp,*kernels/test_gemm.cpp,*kernels/test_conv_depthwise.cpp,*kernels/test_conv.cpp,*kernels/test_onednn.cpp,*kernels/test_gemm_bf16.cpp,*kernels/test_conv_bf16.cpp,*kernels/test_conv_direct.cpp")
foreach(level ${kiln_isa_caps})
  add_test(NAME kernels.isa_cap_${level} COMMAND kiln_tests_kernels "--source-file=${kiln_isa_cap_files}" --no-intro)
  set_tests_properties(kernels.isa_cap_${level} PROPERTIES LABELS unit TIMEOUT 600 SKIP_RETURN_CODE 77
                                                           ENVIRONMENT KILN_CPU_ISA=${level})
endforeach()

# kernels.isa_disassembly: each register-tiled micro-kernel file compiled for its ISA shows that
# ISA's vector FMA (tests/kernels/isa_disassembly.cmake). On x86-64 the AVX-512 files are compiled
# with -march=knl: they build for Knights Landing (AVX-512 F, CD, ER, PF; no BW, VL or DQ).
add_test(NAME kernels.isa_disassembly
         COMMAND ${CMAKE_COMMAND} "-DCXX=${CMAKE_CXX_COMPILER}" "-DOBJDUMP=${CMAKE_OBJDUMP}"
                 "-DARCH=${CMAKE_SYSTEM_PROCESSOR}" -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_CURRENT_BINARY_DIR}/isa
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/kernels/isa_disassembly.cmake)
set_tests_properties(kernels.isa_disassembly PROPERTIES LABELS unit TIMEOUT 300)
