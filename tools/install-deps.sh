#!/usr/bin/env bash
# Installs the Debian 12 packages kiln's build and tests need; does nothing for packages that
# are already there. Run as root (or with sudo available).
#   tools/install-deps.sh          # build + test dependencies
#   tools/install-deps.sh --all    # also the optional backends (oneDNN, MPI) and tools
#   tools/install-deps.sh --test   # also what the tests read and run: the Fashion-MNIST data set,
#                                  # SLURM with munge (slurm-wlm: tests/slurm/run.sh starts its own
#                                  # one-node cluster; the services Debian enables stay unconfigured)
#                                  # and a Python venv (.venv, or $KILN_VENV) with the PyPI
#                                  # readers and peers the tests check kiln against (tensorboard,
#                                  # safetensors, numpy, onnx, onnxruntime; PyTorch with
#                                  # torchvision and onnxscript for the ONNX exporters' files)
#   tools/install-deps.sh --all --baseline
#                                  # also the peers of `kiln bench --vs-pytorch` (bench/baselines):
#                                  # Debian's PyTorch 1.13 with OpenBLAS (without libopenblas0
#                                  # Debian's PyTorch falls back to the reference BLAS and its
#                                  # linear layers run ~40x slower), and PyTorch 2.x and
#                                  # onnxruntime from PyPI in the same venv --test makes (one venv,
#                                  # not a second ~5 GB one: --test needs both packages anyway)
set -euo pipefail

# python3: the build extracts docs/cpp-api.md's snippets for docs.test_docs_snippets with it.
required=(cmake ninja-build g++ ccache pkg-config libeigen3-dev doctest-dev libcli11-dev
          nlohmann-json3-dev libfmt-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev libssl-dev python3)
# libdnnl-dev's CMake package needs the OpenCL headers and loader (its Recommends, which
# --no-install-recommends skips): ocl-icd-opencl-dev.
optional=(libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin libbenchmark-dev gnuplot)
testing=(dataset-fashion-mnist python3-venv python3-pip slurm-wlm)
# Deploying (issue 8): shellcheck lints the job templates of deploy/jobs, Lua runs the modulefile (ctest -R deploy).
testing+=(shellcheck lua5.4)
# Fuzzing (issue 18, tools/fuzz): clang with libFuzzer, whose runtime libclang-rt-dev carries.
testing+=(clang libclang-rt-dev)

baseline=(python3-torch libopenblas0-pthread python3-venv python3-pip)

want=("${required[@]}")
venv=0
for arg in "$@"; do
  case "$arg" in
    --all) want+=("${optional[@]}") ;;
    --test) want+=("${testing[@]}"); venv=1 ;;
    --baseline) want+=("${baseline[@]}"); venv=1 ;;
    *) echo "install-deps: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The Python readers the tests use, from PyPI, in a venv of their own.
onnx_version=1.23.2
make_venv() {
  local dir="${KILN_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}"
  local mods="tensorboard, safetensors, numpy, onnx, onnxruntime, torch, torchvision, onnxscript"
  if "$dir/bin/python" -c "import $mods; assert onnx.__version__ == '$onnx_version'
assert int(torch.__version__.split('.')[0]) >= 2" 2>/dev/null; then
    echo "install-deps: python venv $dir ready"
    return
  fi
  echo "install-deps: creating python venv $dir ($mods)"
  python3 -m venv "$dir"
  # onnx, onnxruntime: tests/e2e/test_onnx.cpp checks kiln's ONNX export with them, and
  # tests/onnx/test_onnx_conformance runs the ONNX backend node tests that onnx's generators rebuild.
  # onnx is pinned: the importer's schema table (io/onnx/onnx_import.cpp) covers the opsets this
  # version knows, and the conformance test fails on a newer one until the table is reviewed.
  # torch, torchvision, onnxscript: tests/onnx/test_onnx_torchvision exports the zoo's torchvision
  # nets with both PyTorch exporters (PyPI's wheels bring their CUDA libraries: about 5.6 GB, about
  # two minutes to fetch and unpack). torch and onnxruntime are also the peers of
  # `kiln bench --vs-pytorch` (--baseline): PyTorch 2.x beside Debian's 1.13, onnxruntime on kiln's export.
  "$dir/bin/pip" install -q --disable-pip-version-check tensorboard safetensors numpy "onnx==$onnx_version" \
    onnxruntime "torch>=2" torchvision onnxscript
}

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  if ((venv)); then make_venv; fi
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists once if they are missing or older than a day.
if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]]; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if ((venv)); then make_venv; fi
