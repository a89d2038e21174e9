# Installs kiln's public headers rooted at kiln/ (run by `cmake --install`; set up in
# cmake/KilnInstall.cmake). The public set is the closure of the seed headers under their includes
# of kiln's floors; each header is installed as <dest>/kiln/<path>, with its includes of the floors
# rewritten from "engine/tensor.h" to "kiln/engine/tensor.h" (include/kiln/kiln.h becomes
# <dest>/kiln/kiln.h). A header included only under #if is still followed: the closure is what any
# configuration of the header may need.
# Inputs:
#   KILN_SOURCE_DIR     the repository
#   KILN_HEADER_SEEDS   headers to start from, relative to the repository
#   KILN_FLOORS         the top-level folders an include may name (kernels;engine;...)
#   KILN_HEADER_STAGE   a build-tree folder for the rewritten copies
#   KILN_HEADER_DEST    the include directory of the prefix (<prefix>/include)
foreach(v KILN_SOURCE_DIR KILN_HEADER_SEEDS KILN_FLOORS KILN_HEADER_STAGE KILN_HEADER_DEST)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "KilnInstallHeaders: ${v} is not set")
  endif()
endforeach()

list(JOIN KILN_FLOORS "|" floors_re)
set(include_re "#[ \t]*include[ \t]*[\"<]((${floors_re})/[^\">]+)[\">]")

# Installed path (under kiln/) of a header given by its path in the repository.
function(kiln_installed_name src out)
  if(src STREQUAL "include/kiln/kiln.h")
    set(${out} kiln.h PARENT_SCOPE)
  else()
    set(${out} ${src} PARENT_SCOPE)
  endif()
endfunction()

set(queue ${KILN_HEADER_SEEDS})
set(seen)
while(queue)
  list(POP_FRONT queue src)
  list(FIND seen ${src} at)  # install scripts run with old policies: no IN_LIST
  if(NOT at EQUAL -1)
    continue()
  endif()
  list(APPEND seen ${src})
  if(NOT EXISTS ${KILN_SOURCE_DIR}/${src})
    message(FATAL_ERROR "KilnInstallHeaders: ${src} (a seed or included by a public header) does not exist")
  endif()
  file(READ ${KILN_SOURCE_DIR}/${src} text)
  string(REGEX MATCHALL "${include_re}" includes "${text}")
  foreach(inc ${includes})
    string(REGEX REPLACE "${include_re}" "\\1" path "${inc}")
    list(APPEND queue ${path})
  endforeach()
  string(REGEX REPLACE "(#[ \t]*include[ \t]*[\"<])(${floors_re})/" "\\1kiln/\\2/" text "${text}")
  kiln_installed_name(${src} name)
  set(staged ${KILN_HEADER_STAGE}/kiln/${name})
  set(old "")
  if(EXISTS ${staged})
    file(READ ${staged} old)
  endif()
  if(NOT old STREQUAL text)  # unchanged copies keep their time stamps: an install is a no-op
    file(WRITE ${staged} "${text}")
  endif()
  get_filename_component(dir ${name} DIRECTORY)
  file(INSTALL DESTINATION ${KILN_HEADER_DEST}/kiln/${dir} TYPE FILE FILES ${staged})
endwhile()
list(LENGTH seen n)
list(LENGTH KILN_HEADER_SEEDS n_seeds)
message(STATUS "kiln: ${n} public headers (the closure of ${n_seeds} seeds under their includes)")
