# `cmake --install build --prefix P`: kiln as an installable, linkable library.
#   P/bin/kiln                          the CLI (linked statically against kiln)
#   P/lib/libkiln.so*, P/lib/libkiln.a  the library, shared and static
#   P/include/kiln/kiln.h               the umbrella header; build_config.h (generated) beside it
#   P/include/kiln/{engine,layers,io,dist,nets,train,kernels/...}/*.h   the public headers, by the
#                                       same relative paths the library uses ("engine/tensor.h")
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
set(KILN_GENERATED_INCLUDE ${PROJECT_BINARY_DIR}/include)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln_build_config.h.in ${KILN_GENERATED_INCLUDE}/kiln/build_config.h @ONLY)
target_include_directories(kiln_engine PRIVATE ${KILN_GENERATED_INCLUDE})

# --- usage requirements of the installed targets ----------------------------------------------
# In the build tree both libraries carry kiln_deps (every dependency, its include dirs and the
# KILN_HAVE_* definitions). No public header includes a vendor header or tests a KILN_HAVE_* macro,
# so installed, the shared library needs nothing of its users (its own RUNPATH finds libdnnl,
# libcudart, ...), and the static one needs only its dependencies' libraries at link time.
foreach(lib kiln kiln_static)
  target_include_directories(${lib} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${KILN_GENERATED_INCLUDE}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/kiln>
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
# Public: every header of engine/ layers/ io/ dist/ nets/ train/ except those marked internal;
# kernels/common/*.h but parallel.h, the plain descriptors (GemmDesc, ConvDesc ...) and scalar functors that
# public headers include and that a user's own kernel candidate for a built-in op is written
# against (examples/custom_kernel); and kernels/cuda/runtime.h, included by engine/cuda_runtime.h
# (it includes <cuda_runtime_api.h> only under KILN_HAVE_CUDA, which users of the installed library
# do not define). The rest of kernels/ stays private. tests/consumer compiles all of them in one file.
set(kiln_private_headers dist/mpi_comm.h dist/nccl_comm.h dist/signature.h)
file(GLOB kiln_kernel_headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/common/*.h)
# parallel.h stays private: its inline functions differ with and without -fopenmp.
list(REMOVE_ITEM kiln_kernel_headers kernels/common/parallel.h)
list(APPEND kiln_kernel_headers kernels/cuda/runtime.h)
set(kiln_public_headers ${kiln_kernel_headers})
foreach(floor engine layers io dist nets train)
  file(GLOB_RECURSE hdrs RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/${floor}/*.h ${PROJECT_SOURCE_DIR}/${floor}/*.inc)
  list(APPEND kiln_public_headers ${hdrs})
endforeach()
list(REMOVE_ITEM kiln_public_headers ${kiln_private_headers})
foreach(h ${kiln_public_headers})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir} COMPONENT devel)
endforeach()
install(FILES include/kiln/kiln.h ${KILN_GENERATED_INCLUDE}/kiln/build_config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT devel)

# --- libraries, CLI, CMake package ------------------------------------------------------------
install(TARGETS kiln kiln_static EXPORT kilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${kiln_cmake_dir})

set(KILN_COMPONENTS_BUILT "")
foreach(c ONEDNN CUDA CUDNN MPI NCCL)
  if(KILN_HAVE_${c})
    string(TOLOWER ${c} low)
    list(APPEND KILN_COMPONENTS_BUILT ${low})
  endif()
endforeach()
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
