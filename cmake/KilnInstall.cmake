# `cmake --install build --prefix P`: kiln as an installable, linkable library.
#   P/bin/kiln                          the CLI (linked statically against kiln)
#   P/lib/libkiln.so*, P/lib/libkiln.a  the library, shared and static
#   P/include/kiln/kiln.h               the umbrella header; build_config.h (generated) beside it
#   P/include/kiln/{engine,layers,io,dist,nets,train,kernels/common}/...  the public headers, rooted
#                                       at kiln/: users write #include <kiln/engine/tensor.h>, and
#                                       only P/include is on their include path
#   P/lib/cmake/kiln/                   kilnConfig.cmake, kilnConfigVersion.cmake, kilnTargets*.cmake
#   P/lib/pkgconfig/kiln.pc
# Targets: kiln::kiln (shared) and kiln::kiln_static; find_package(kiln 0.1 COMPONENTS mpi cuda ...)
# fails cleanly when kiln was built without one. Tested by tests/consumer (ctest -R consumer).
# Included at the end of the top-level CMakeLists.txt, after every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# --- version and build configuration, readable at run time (engine/version.h) ---------------
foreach(opt OPENMP EIGEN ONEDNN MPI CUDA CUBLAS CUDNN NCCL)
  string(TOLOWER ${opt} low)
  if(KILN_HAVE_${opt})
    set(kiln_cfg_${low} 1)
  else()
    set(kiln_cfg_${low} 0)
  endif()
endforeach()
set(kiln_cfg_cuda_version "")
set(kiln_cfg_cuda_archs "")
if(KILN_HAVE_CUDA)
  set(kiln_cfg_cuda_version "${CUDAToolkit_VERSION}")
  set(kiln_cfg_cuda_archs "${KILN_CUDA_ARCHS}")
endif()
# KILN_GENERATED_INCLUDE (build/include) is on every floor's include path (cmake/KilnFloors.cmake).
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln_build_config.h.in ${KILN_GENERATED_INCLUDE}/kiln/build_config.h @ONLY)

# --- usage requirements of the installed targets ----------------------------------------------
# In the build tree both libraries carry kiln_deps (every dependency, its include dirs and the
# KILN_HAVE_* definitions). No public header includes a vendor header or tests a KILN_HAVE_* macro,
# so installed, the shared library needs nothing of its users (its own RUNPATH finds libdnnl,
# libcudart, ...), and the static one needs only its dependencies' libraries at link time.
foreach(lib kiln kiln_static)
  target_include_directories(${lib} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${KILN_GENERATED_INCLUDE}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${lib} PUBLIC cxx_std_17)
endforeach()
set_target_properties(kiln PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                                      EXPORT_NAME kiln)
set_target_properties(kiln_static PROPERTIES EXPORT_NAME kiln_static)

# What a static link needs (kilnConfig.cmake finds the same packages again).
set(kiln_static_deps Threads::Threads ZLIB::ZLIB JPEG::JPEG PNG::PNG OpenSSL::Crypto)
if(KILN_HAVE_OPENMP)
  list(APPEND kiln_static_deps OpenMP::OpenMP_CXX)
endif()
if(KILN_HAVE_ONEDNN)
  list(APPEND kiln_static_deps DNNL::dnnl)
endif()
if(KILN_HAVE_MPI)
  list(APPEND kiln_static_deps MPI::MPI_CXX)
endif()
if(KILN_HAVE_CUDA)
  list(APPEND kiln_static_deps CUDA::cudart)
  if(KILN_HAVE_CUBLAS)
    list(APPEND kiln_static_deps CUDA::cublas)
  endif()
  if(KILN_HAVE_CUDNN)
    list(APPEND kiln_static_deps ${KILN_CUDNN_LIB})
  endif()
  if(KILN_HAVE_NCCL)
    list(APPEND kiln_static_deps ${KILN_NCCL_LIB})
  endif()
endif()
foreach(dep ${kiln_static_deps})
  target_link_libraries(kiln_static INTERFACE $<INSTALL_INTERFACE:$<LINK_ONLY:${dep}>>)
endforeach()

# The installed shared library and CLI find kiln's own libraries beside them and the vendor
# libraries (CUDA in /usr/local/cuda/lib, ...) where the build found them.
set_target_properties(kiln kiln_cli PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}" INSTALL_RPATH_USE_LINK_PATH ON)

# --- headers ------------------------------------------------------------------------------------
# Public: what include/kiln/kiln.h reaches, following its includes, plus what the dispatcher's
# extension point (user kernels registered from outside the library: examples/custom_kernel,
# tests/engine/test_user_register.cpp) reaches from engine/dispatch.h and the op declarations. The
# rest (kernels/cpu, kernels/cuda, dist's communicator internals, ...) stays private. The sources
# include "engine/tensor.h"; installed, every header sits under P/include/kiln/ and its includes of
# kiln's floors read "kiln/engine/tensor.h", so only P/include goes on a user's path and no generic
# name ("io/...", "engine/...") reaches user code. The closure is computed and the includes are
# rewritten at install time (cmake/KilnInstallHeaders.cmake), so a header added to the closure is
# installed without touching a list. tests/consumer compiles every installed header in one file
# and checks that "engine/tensor.h" does not resolve.
# engine/op_decl.h declares every built-in op with its descriptor (kernels/common/gemm.h ...), which
# a user's kernel for one of them is written against.
set(kiln_header_seeds include/kiln/kiln.h engine/dispatch.h engine/op_decl.h)
install(CODE "
  set(KILN_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(KILN_HEADER_SEEDS \"${kiln_header_seeds}\")
  set(KILN_FLOORS \"${KILN_FLOORS}\")
  set(KILN_HEADER_STAGE \"${PROJECT_BINARY_DIR}/install_headers\")
  set(KILN_HEADER_DEST \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/KilnInstallHeaders.cmake\")" COMPONENT devel)
install(FILES ${KILN_GENERATED_INCLUDE}/kiln/build_config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT devel)

# --- libraries, CLI, CMake package ------------------------------------------------------------
install(TARGETS kiln kiln_static EXPORT kilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${kiln_cmake_dir})

# COMPONENTS: the backends' build switches as engine/backends/backends.inc lists them (the list
# the registration reads), and the communicators (mpi, nccl), which are not backends.
include(${PROJECT_SOURCE_DIR}/cmake/KilnBackends.cmake)
kiln_backend_components(KILN_COMPONENTS_BUILT KILN_COMPONENTS_KNOWN)
foreach(c MPI NCCL)
  string(TOLOWER ${c} low)
  list(APPEND KILN_COMPONENTS_KNOWN ${low})
  if(KILN_HAVE_${c})
    list(APPEND KILN_COMPONENTS_BUILT ${low})
  endif()
endforeach()
list(APPEND KILN_COMPONENTS_KNOWN static)
string(REPLACE ";" " " KILN_COMPONENTS_KNOWN_TEXT "${KILN_COMPONENTS_KNOWN}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${kiln_cmake_dir})
# 0.x: any newer 0.y satisfies find_package(kiln 0.1); from 1.0 on, the same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(kiln_compat AnyNewerVersion)
else()
  set(kiln_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY ${kiln_compat})
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${kiln_cmake_dir})

# --- pkg-config ---------------------------------------------------------------------------------
# `pkg-config --cflags --libs kiln` links the shared library; `--static` adds Libs.private.
set(kiln_pc_private "-lpthread")
foreach(v ZLIB_LIBRARY_RELEASE JPEG_LIBRARY_RELEASE PNG_LIBRARY_RELEASE OPENSSL_CRYPTO_LIBRARY)
  if(${v})
    string(APPEND kiln_pc_private " ${${v}}")
  endif()
endforeach()
if(KILN_HAVE_OPENMP)
  string(APPEND kiln_pc_private " ${OpenMP_CXX_FLAGS}")
endif()
if(KILN_HAVE_ONEDNN)
  string(APPEND kiln_pc_private " $<TARGET_LINKER_FILE:DNNL::dnnl>")
endif()
if(KILN_HAVE_MPI)
  foreach(l ${MPI_CXX_LIBRARIES})
    string(APPEND kiln_pc_private " ${l}")
  endforeach()
endif()
if(KILN_HAVE_CUDA)
  string(APPEND kiln_pc_private " ${CUDA_cudart_LIBRARY}")
  foreach(c CUBLAS:CUDA_cublas_LIBRARY CUDNN:KILN_CUDNN_LIB NCCL:KILN_NCCL_LIB)
    string(REPLACE ":" ";" c ${c})
    list(GET c 0 have)
    list(GET c 1 var)
    if(KILN_HAVE_${have})
      string(APPEND kiln_pc_private " ${${var}}")
    endif()
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc.in @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/kiln.pc INPUT ${PROJECT_BINARY_DIR}/kiln.pc.in)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
