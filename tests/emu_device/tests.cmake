# The emulated-device build's own tests (preset emu-device; included by tests/CMakeLists.txt, whose
# tests/gpu block has already added the GPU suite, which here runs on the emulated cuda:0/cuda:1).
#  - tests/emu_device/*.cpp: the emulated runtime, and the planted bugs it must catch (label emu_device);
#  - the CLI on the emulated device: kiln info, bench, train, and mpirun -np 2 train (label emu_device).
# Executables export their symbols, so the host-access fault's stack names functions, and doctest
# leaves SIGSEGV to the emulated device's fault handler (which names the place; doctest's would
# only say "crashed").
set_target_properties(kiln_tests_gpu PROPERTIES ENABLE_EXPORTS ON)
target_compile_definitions(kiln_tests_gpu PRIVATE DOCTEST_CONFIG_NO_POSIX_SIGNALS)
target_compile_definitions(kiln_test_support PRIVATE DOCTEST_CONFIG_NO_POSIX_SIGNALS)
set_target_properties(kiln_cli PROPERTIES ENABLE_EXPORTS ON)

file(GLOB emu_device_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/emu_device/*.cpp)
add_executable(kiln_tests_emu_device ${emu_device_srcs})
target_link_libraries(kiln_tests_emu_device PRIVATE kiln_test_support)
set_target_properties(kiln_tests_emu_device PROPERTIES ENABLE_EXPORTS ON)
foreach(src ${emu_device_srcs})
  get_filename_component(stem ${src} NAME_WE)
  add_test(NAME emu_device.${stem} COMMAND kiln_tests_emu_device --source-file=*emu_device/${stem}.cpp
                                           --test-case-exclude=*sm_70* --no-intro)
  set_tests_properties(emu_device.${stem} PROPERTIES LABELS emu_device TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
# The launch limits of another architecture: Volta's 96 KiB of opt-in shared memory.
add_test(NAME emu_device.launch_limits_sm_70 COMMAND kiln_tests_emu_device --test-case=*sm_70* --no-intro)
set_tests_properties(emu_device.launch_limits_sm_70 PROPERTIES LABELS emu_device TIMEOUT 60 ENVIRONMENT KILN_EMU_ARCH=sm_70)
