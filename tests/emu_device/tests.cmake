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

# The CLI on the emulated device (tests/cli/run_kiln.cmake checks the exit code and the output).
# FILE <path>: a file the run must write.
function(kiln_emu_cli_test name rc regex)
  cmake_parse_arguments(arg "" "FILE" "" ${ARGN})
  add_test(NAME emu_device.cli_${name}
           COMMAND ${CMAKE_COMMAND} -DKILN=$<TARGET_FILE:kiln_cli> "-DARGS=${arg_UNPARSED_ARGUMENTS}"
                   -DEXPECT_RC=${rc} "-DEXPECT_REGEX=${regex}" -DEXPECT_FILE=${arg_FILE}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_kiln.cmake)
  set_tests_properties(emu_device.cli_${name} PROPERTIES LABELS emu_device TIMEOUT 300)
endfunction()
kiln_emu_cli_test(info 0 "cuda: emulated devices.*cuda:1 +kiln emulated device" info)
kiln_emu_cli_test(bench 0 "mnist-cnn +cuda +auto +2 +forward.*mnist-cnn +cuda +auto +2 +train"
                  bench --model mnist-cnn --device cuda --batch 2 --iters 2 --warmup 1 --mode forward,train)
# One epoch from an empty log directory (4 steps, checkpoint from CUDA tensors), then a second
# epoch resumed from that checkpoint.
set(emu_ckpt ${CMAKE_CURRENT_BINARY_DIR}/emu_device_train)
add_test(NAME emu_device.cli_train_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${emu_ckpt})
set_tests_properties(emu_device.cli_train_clean PROPERTIES LABELS emu_device FIXTURES_SETUP emu_train_dir)
kiln_emu_cli_test(train 0 "test: loss [0-9.]+ top-1.*epoch 1: train loss [0-9.]+"
                  train --model mnist-cnn --device cuda --data synthetic:1x28x28:10:64 --epochs 1 --batch 16
                  --optimizer adam --lr 1e-3 --logdir ${emu_ckpt} FILE ${emu_ckpt}/ckpt-00000004.safetensors)
kiln_emu_cli_test(train_resume 0 "test: loss [0-9.]+ top-1.*epoch 2: train loss [0-9.]+"
                  train --model mnist-cnn --device cuda --data synthetic:1x28x28:10:64 --epochs 2 --batch 16
                  --optimizer adam --lr 1e-3 --logdir ${emu_ckpt} --resume latest
                  FILE ${emu_ckpt}/ckpt-00000008.safetensors)
set_tests_properties(emu_device.cli_train PROPERTIES FIXTURES_REQUIRED emu_train_dir)
set_tests_properties(emu_device.cli_train_resume PROPERTIES FIXTURES_REQUIRED emu_train_dir DEPENDS emu_device.cli_train)

if(KILN_HAVE_MPI)
  set(mpi_flags --oversubscribe --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none
                ${MPIEXEC_NUMPROC_FLAG} 2)
  set(mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # `mpirun -np 2 kiln train --strategy sync --device cuda`: each rank on its own emulated device.
  set(args ${mpi_flags} $<TARGET_FILE:kiln_cli> train --model mnist-cnn --device cuda
           --data synthetic:1x28x28:10:64 --strategy sync --epochs 1 --batch 8 --workers 0 --quiet)
  add_test(NAME emu_device.mpi_cli_sync
           COMMAND ${CMAKE_COMMAND} -DKILN=${MPIEXEC_EXECUTABLE} "-DARGS=${args}" -DEXPECT_RC=0
                   "-DEXPECT_REGEX=test: loss [0-9.]+ top-1" -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_kiln.cmake)
  set_tests_properties(emu_device.mpi_cli_sync PROPERTIES LABELS emu_device TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${mpi_env}")
  # ... and its parameters equal one process's with the doubled batch.
  add_executable(kiln_tests_emu_device_mpi emu_device/mpi/test_sync_cuda.cpp mpi/main.cpp support/testing.cpp)
  target_link_libraries(kiln_tests_emu_device_mpi PRIVATE kiln_static doctest::doctest)
  target_compile_definitions(kiln_tests_emu_device_mpi PRIVATE KILN_TEST_PYTHON="${KILN_TEST_PYTHON}"
                                                               KILN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME emu_device.mpi_sync_cuda
           COMMAND ${MPIEXEC_EXECUTABLE} ${mpi_flags} $<TARGET_FILE:kiln_tests_emu_device_mpi> --no-intro)
  set_tests_properties(emu_device.mpi_sync_cuda PROPERTIES LABELS emu_device TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "${mpi_env}")
else()
  # Not silently absent: the two MPI runs on the emulated device report Skipped, or fail under
  # CI=true (tools/install-deps.sh --all installs Open MPI).
  add_test(NAME emu_device.mpi_not_built COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/support/skip.sh "MPI"
           "kiln was configured without MPI: emu_device.mpi_cli_sync and emu_device.mpi_sync_cuda need it (libopenmpi-dev: tools/install-deps.sh --all)")
  set_tests_properties(emu_device.mpi_not_built PROPERTIES LABELS emu_device TIMEOUT 10 SKIP_RETURN_CODE 77)
endif()

# tools/gpu-check end to end on the emulated device (pack, verify-pack in a bare root, every step,
# the summary), so that a lent GPU's one call meets a script already run (tests/emu_device/gpu_check.sh).
add_test(NAME emu_device.gpu_check
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/emu_device/gpu_check.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/gpu_check)
set_tests_properties(emu_device.gpu_check PROPERTIES LABELS emu_device TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "KILN_TEST_PYTHON=${KILN_TEST_PYTHON}")
