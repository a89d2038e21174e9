# The part the cross toolchain files share (cmake/toolchains/ppc64le.cmake, aarch64.cmake): Debian's
# cross compiler g++-<triplet>, the target's libraries from a sysroot of Debian packages for that
# architecture, and tests run under qemu-user. tools/cross-check installs the compiler and qemu and
# makes the sysroot; docs/cross.md says why a sysroot rather than multiarch packages.
# The including file sets KILN_CROSS_TRIPLET (powerpc64le-linux-gnu), CMAKE_SYSTEM_PROCESSOR,
# KILN_CROSS_QEMU (qemu-ppc64le), KILN_CROSS_QEMU_ARGS (-cpu power8) and, optionally,
# KILN_CROSS_QEMU_MIN_VERSION with KILN_CROSS_QEMU_WHY.
#   -DKILN_CROSS_SYSROOT=<dir>      the extracted packages (required; the presets ppc64le and
#                                   aarch64 name build-<arch>/sysroot, made by tools/cross-check)
#   -DKILN_CROSS_QEMU_PATH=<file>   qemu-user for the target (default: found on PATH; the presets
#                                   name build-<arch>/qemu/usr/bin/qemu-<arch>: QEMU >= 8.1)
set(CMAKE_SYSTEM_NAME Linux)

# The toolchain file is read again in every try_compile project, which sees only the variables
# named here.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KILN_CROSS_SYSROOT KILN_CROSS_QEMU_PATH)
if(NOT KILN_CROSS_SYSROOT OR NOT EXISTS "${KILN_CROSS_SYSROOT}/usr/lib/${KILN_CROSS_TRIPLET}")
  message(FATAL_ERROR "KILN_CROSS_SYSROOT='${KILN_CROSS_SYSROOT}' holds no ${KILN_CROSS_TRIPLET} libraries: "
                      "pass -DKILN_CROSS_SYSROOT=<dir> as made by tools/cross-check")
endif()

find_program(CMAKE_CXX_COMPILER ${KILN_CROSS_TRIPLET}-g++ REQUIRED)
find_program(CMAKE_C_COMPILER ${KILN_CROSS_TRIPLET}-gcc REQUIRED)

# --sysroot: headers and libraries of the target's packages (multiarch paths included) come from
# the sysroot, never from this machine's /usr; libc and libstdc++ stay the cross compiler's own.
set(CMAKE_SYSROOT "${KILN_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${KILN_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Every built program runs under qemu-user: ctest prefixes test commands naming a target with it,
# and tests that run a built program through a script take it from tests/CMakeLists.txt
# (KILN_TEST_EMULATOR). -L: the guest's absolute paths (the dynamic loader, Open MPI's plugins)
# resolve in the sysroot first. binfmt_misc is not needed.
find_program(KILN_CROSS_QEMU_PATH NAMES ${KILN_CROSS_QEMU} ${KILN_CROSS_QEMU}-static REQUIRED)
execute_process(COMMAND ${KILN_CROSS_QEMU_PATH} --version OUTPUT_VARIABLE kiln_qemu_version RESULT_VARIABLE kiln_qemu_rc)
if(NOT kiln_qemu_rc EQUAL 0 OR NOT kiln_qemu_version MATCHES "version ([0-9]+[.][0-9]+)")
  message(FATAL_ERROR "KILN_CROSS_QEMU_PATH='${KILN_CROSS_QEMU_PATH}' does not run (tools/cross-check fetches it)")
endif()
if(KILN_CROSS_QEMU_MIN_VERSION AND CMAKE_MATCH_1 VERSION_LESS KILN_CROSS_QEMU_MIN_VERSION)
  message(FATAL_ERROR "${KILN_CROSS_QEMU_PATH} is QEMU ${CMAKE_MATCH_1}; ${KILN_CROSS_QEMU_MIN_VERSION} or newer is "
                      "needed: ${KILN_CROSS_QEMU_WHY} (tools/cross-check fetches one)")
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR "${KILN_CROSS_QEMU_PATH};${KILN_CROSS_QEMU_ARGS};-L;${KILN_CROSS_SYSROOT}")

# Open MPI: the host's mpicxx wrapper would report the host's paths, so MPI is named directly
# (FindMPI skips the wrapper when the library names and include path are given); the ranks are
# started by the host's mpiexec (openmpi-bin) under qemu. OMPI_SKIP_MPICXX: kiln calls the C API.
set(kiln_ompi "${KILN_CROSS_SYSROOT}/usr/lib/${KILN_CROSS_TRIPLET}/openmpi")
if(EXISTS "${kiln_ompi}/include/mpi.h")
  set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "")
  set(MPI_CXX_LIB_NAMES mpi CACHE STRING "")
  set(MPI_mpi_LIBRARY "${kiln_ompi}/lib/libmpi.so" CACHE FILEPATH "")
  set(MPI_CXX_HEADER_DIR "${kiln_ompi}/include" CACHE PATH "")
  set(MPI_CXX_INCLUDE_PATH "${kiln_ompi}/include" CACHE PATH "")
  find_program(MPIEXEC_EXECUTABLE NAMES mpiexec.openmpi mpiexec)
endif()
