#!/usr/bin/env bash
# Peak memory (the process's ru_maxrss) of training a net, kiln beside PyTorch 1.13 as installed
# and at its best (channels-last, glibc malloc told not to unmap), each in a fresh process doing
# 1 warm-up and 2 timed forward+backward iterations.
#   bench/peak_memory.sh [model] [batch] [threads]        (default resnet50 32 all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-resnet50}"
batch="${2:-32}"
threads="${3:-$(nproc)}"
kiln="${KILN_BUILD_DIR:-build}/tools/kiln"
# Runs a command and prints the peak resident set size of its (largest) child process, in MiB.
peak() {
  /usr/bin/python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f}")' "$@"
}
k=$(peak "$kiln" bench --model "$model" --batch "$batch" --mode train --iters 2 --warmup 1 --threads "$threads")
p=$(peak /usr/bin/python3 bench/baselines/pytorch_bench.py --model "$model" --batch "$batch" --mode train --iters 2 \
      --warmup 1 --threads "$threads")
b=$(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 \
    peak /usr/bin/python3 bench/baselines/pytorch_bench.py --model "$model" --batch "$batch" --mode train --iters 2 \
      --warmup 1 --threads "$threads" --channels-last)
echo "$model batch $batch train, peak RSS (ru_maxrss): kiln $k MiB, PyTorch as installed $p MiB, PyTorch channels-last $b MiB"
echo "kiln / PyTorch: $(/usr/bin/python3 -c "print(f'{$k/$p:.2f} (as installed), {$k/$b:.2f} (channels-last)')")"
