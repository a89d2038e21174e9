#!/usr/bin/env bash
# Installs a kiln build tree into a temporary prefix and builds and runs programs against it, as a
# user would. CTest runs it twice (tests/CMakeLists.txt, label e2e):
#   run_consumer.sh cmake     <build dir> <source dir> <work dir>   find_package(kiln): tests/consumer
#                                                                   (shared + static), examples/, and
#                                                                   COMPONENTS checks
#   run_consumer.sh pkgconfig <build dir> <source dir> <work dir>   pkg-config --cflags --libs kiln
# Needs the build's kiln, kiln_static and kiln_cli targets built. Consumer builds use ccache when present.
set -euo pipefail

mode=$1 build=$2 src=$3 work=$4
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/kiln lib/libkiln.a include/kiln/kiln.h include/kiln/build_config.h include/kiln/engine/tensor.h \
         lib/cmake/kiln/kilnConfig.cmake lib/cmake/kiln/kilnConfigVersion.cmake lib/pkgconfig/kiln.pc; do
  [[ -e $prefix/$f ]] || fail "$f not installed"
done
ls "$prefix"/lib/libkiln.so* > /dev/null || fail "libkiln.so not installed"
for f in dist/mpi_comm.h kernels/common/parallel.h kernels/cpu kernels/cuda/native; do
  [[ ! -e $prefix/include/kiln/$f ]] || fail "private $f installed"
done
# Installed headers are rooted at kiln/: none includes a floor by its short name.
short=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](kernels|engine|layers|io|dist|nets|train)/' \
        "$prefix/include/kiln" || true)
[[ -z $short ]] || fail "installed headers include short names (\"engine/...\"): $short"

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
configure() {  # configure <source> <binary> [args...]
  local s=$1 b=$2
  shift 2
  cmake -S "$s" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" "$@"
}

if [[ $mode == cmake ]]; then
  step "tests/consumer with find_package(kiln 0.1 COMPONENTS <what this kiln was built with>)"
  built=$(sed -n 's/^set(kiln_BUILT_COMPONENTS "\(.*\)")$/\1/p' "$prefix/lib/cmake/kiln/kilnConfig.cmake")
  configure "$src/tests/consumer" "$work/consumer" "-DKILN_COMPONENTS=$built;static" > "$work/consumer.log" ||
    { cat "$work/consumer.log"; fail "configure"; }
  grep "kiln 0.1" "$work/consumer.log"
  cmake --build "$work/consumer" -j2
  "$work/consumer/consumer" | tail -1 | grep -x "consumer: OK"
  "$work/consumer/consumer_static" | tail -1 | grep -x "consumer: OK"
  "$work/consumer/libtorch_style" > "$work/libtorch_style.log" || { cat "$work/libtorch_style.log"; fail "libtorch_style"; }
  tail -1 "$work/libtorch_style.log" | grep "^libtorch_style: OK"
  readelf -d "$work/consumer/consumer" | grep -q "libkiln.so" || fail "consumer is not linked to libkiln.so"

  step "a component kiln lacks fails find_package cleanly"
  if configure "$src/tests/consumer" "$work/consumer_bad" -DKILN_COMPONENTS=tpu > "$work/bad.log" 2>&1; then
    fail "find_package(kiln COMPONENTS tpu) succeeded"
  fi
  grep -q "unknown kiln component 'tpu'" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear message"; }
  # This kiln has every backend; pretend it lacks mpi (the installed config edited in place).
  cfg=$prefix/lib/cmake/kiln/kilnConfig.cmake
  cp "$cfg" "$work/kilnConfig.cmake.orig"
  sed -i 's/^set(kiln_BUILT_COMPONENTS .*/set(kiln_BUILT_COMPONENTS "onednn")/' "$cfg"
  if configure "$src/tests/consumer" "$work/consumer_nompi" -DKILN_COMPONENTS=mpi > "$work/nompi.log" 2>&1; then
    fail "find_package(kiln COMPONENTS mpi) succeeded on a kiln without MPI"
  fi
  grep -q "was built without mpi" "$work/nompi.log" || { cat "$work/nompi.log"; fail "no clear message"; }
  cp "$work/kilnConfig.cmake.orig" "$cfg"
  step "a version kiln is not fails find_package"
  mkdir -p "$work/v2"
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(v LANGUAGES CXX)\nfind_package(kiln 1.0 REQUIRED)\n' \
    > "$work/v2/CMakeLists.txt"
  if configure "$work/v2" "$work/v2/build" > "$work/v2.log" 2>&1; then fail "find_package(kiln 1.0) succeeded"; fi

  step "examples/"
  configure "$src/examples" "$work/examples" > "$work/examples.log" || { cat "$work/examples.log"; fail "configure"; }
  cmake --build "$work/examples" -j2
  "$work/examples/custom_kernel/custom_kernel" | tee "$work/custom.out"
  grep -qx "custom_kernel: OK" "$work/custom.out"
  "$work/examples/train_own_net/train_own_net" synthetic:1x28x28:10:2048:learnable 1 | tee "$work/own.out"
  grep -Eq "^test: loss [0-9.]+ top-1 (0[.]9|1[.]0)" "$work/own.out" || fail "train_own_net did not learn"
  # A checkpoint written by the installed `kiln train`, read back by infer_checkpoint.
  "$prefix/bin/kiln" train --model mnist-cnn --data synthetic:1x28x28:10:1024:learnable --epochs 2 --batch 32 \
    --optimizer adam --lr 1e-3 --logdir "$work/run" --quiet --workers 0
  "$work/examples/infer_checkpoint/infer_checkpoint" "$work/run" | tee "$work/infer.out"
  grep -Eq "^infer_checkpoint: [6-8] of 8 right" "$work/infer.out" || fail "infer_checkpoint predictions"
elif [[ $mode == pkgconfig ]]; then
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  step "pkg-config kiln $(pkg-config --modversion kiln)"
  [[ $(pkg-config --modversion kiln) == "$(sed -n 's/^#define KILN_VERSION_STRING "\(.*\)"/\1/p' \
        "$prefix/include/kiln/build_config.h")" ]] || fail "kiln.pc version differs from build_config.h"
  cxx=${CXX:-c++}
  command -v ccache > /dev/null && cxx="ccache $cxx"
  # shellcheck disable=SC2046  # pkg-config's flags are meant to split
  $cxx -std=c++17 -O1 "$src/tests/consumer/consumer.cpp" -o "$work/consumer_pc" $(pkg-config --cflags --libs kiln)
  "$work/consumer_pc" | tail -1 | grep -x "consumer: OK"
  step "pkg-config --cflags: <kiln/engine/tensor.h> resolves, \"engine/tensor.h\" does not"
  # shellcheck disable=SC2046
  echo '#include <kiln/engine/tensor.h>' | $cxx -std=c++17 -fsyntax-only -x c++ - $(pkg-config --cflags kiln) ||
    fail "#include <kiln/engine/tensor.h> does not compile with pkg-config --cflags kiln"
  # shellcheck disable=SC2046
  if echo '#include "engine/tensor.h"' | $cxx -std=c++17 -fsyntax-only -x c++ - $(pkg-config --cflags kiln) 2> "$work/short.log"; then
    fail "#include \"engine/tensor.h\" resolves with pkg-config --cflags kiln"
  fi
  grep -q "engine/tensor.h" "$work/short.log" || { cat "$work/short.log"; fail "the short include failed for another reason"; }
  step "pkg-config --static"
  # shellcheck disable=SC2046
  $cxx -std=c++17 -O1 "$src/tests/consumer/consumer.cpp" -o "$work/consumer_pc_static" \
    $(pkg-config --cflags kiln) "$prefix/lib/libkiln.a" $(pkg-config --libs-only-other --libs-only-l --static kiln | sed 's/-lkiln//')
  "$work/consumer_pc_static" | tail -1 | grep -x "consumer: OK"
else
  fail "mode $mode: cmake or pkgconfig"
fi
echo "consumer ($mode): OK"
