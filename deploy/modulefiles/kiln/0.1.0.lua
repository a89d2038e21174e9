-- Lmod modulefile for kiln 0.1.0 (template). Install as <modulepath>/kiln/0.1.0.lua, e.g.
--   cmake --install build --prefix /apps/kiln/0.1.0
--   install -Dm644 deploy/modulefiles/kiln/0.1.0.lua /apps/modulefiles/kiln/0.1.0.lua
-- then `module use /apps/modulefiles; module load kiln/0.1.0`. The job templates of deploy/jobs
-- load it and read KILN_ROOT.
-- EDIT: `root` to the install prefix; the depends_on lines to the modules kiln was built with
-- (its MPI, CUDA, cuDNN/NCCL where they are not in the system paths).

local version = "0.1.0"
local root = "/apps/kiln/" .. version   -- EDIT: the prefix given to cmake --install

whatis("Name: kiln")
whatis("Version: " .. version)
whatis("Category: library, tools, machine learning")
whatis("Description: deep-learning engine in C++17: CPU (native, oneDNN) and CUDA (cuDNN, cuBLAS) backends, MPI/NCCL data parallelism; the kiln tool (bench, train, eval, info)")
whatis("URL: see " .. root .. "/share/doc/kiln")

help([[
kiln ]] .. version .. [[: a deep-learning engine and its command-line tool.

  kiln info                     version, build, libraries, CPU ISA, GPUs (--json for tickets)
  kiln bench --model resnet50   time forward/backward of zoo nets (--out results.json)
  kiln train --model ... --data ...   train; under srun/mpirun add --strategy sync

Job templates (SLURM, LSF, PBS) are in the kiln sources under deploy/jobs.
Linking your own C++ code: find_package(kiln) (CMAKE_PREFIX_PATH is set) or
pkg-config --cflags --libs kiln (PKG_CONFIG_PATH is set).
Environment: KILN_ROOT=]] .. root .. [[
]])

conflict("kiln")
-- EDIT: the modules kiln was built against, if your site provides them as modules.
-- depends_on("openmpi/4.1")
-- depends_on("cuda/12.6")

-- GNUInstallDirs puts libraries in lib64 on RHEL-like systems, lib elsewhere.
local libdir = isDir(pathJoin(root, "lib64")) and pathJoin(root, "lib64") or pathJoin(root, "lib")

setenv("KILN_ROOT", root)
prepend_path("PATH", pathJoin(root, "bin"))
prepend_path("LD_LIBRARY_PATH", libdir)
prepend_path("CMAKE_PREFIX_PATH", root)
prepend_path("PKG_CONFIG_PATH", pathJoin(libdir, "pkgconfig"))
prepend_path("MANPATH", pathJoin(root, "share", "man"))
