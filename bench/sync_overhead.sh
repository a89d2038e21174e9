#!/usr/bin/env bash
# Synchronous data parallelism's cost on N ranks of this machine: `kiln bench --mode train` of one
# model alone (1 rank, no communication) beside N ranks with --strategy sync, with overlap (buckets
# all-reduced during backward), without (all after backward), fp16 compression and kiln's ring.
# Every rank runs with the same thread count, so the one-rank row is the per-rank compute baseline.
# Prints per configuration: the median step (ms), the wait for the all-reduce after backward (ms;
# the part not hidden behind backward), the job's images/s and the overhead against one rank.
#   bench/sync_overhead.sh [model] [batch] [ranks] [threads per rank]
#   bench/sync_overhead.sh resnet18 16 2 1
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-resnet18}"
batch="${2:-16}"
ranks="${3:-2}"
threads="${4:-1}"
kiln="${KILN_BUILD_DIR:-build}/tools/kiln"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
common=(bench --model "$model" --batch "$batch" --mode train --iters 10 --warmup 3 --threads "$threads" --no-progress)

"$kiln" "${common[@]}" --out "$out/single.json" >/dev/null
run() {  # run <name> <flags...>
  local name=$1
  shift
  mpirun --oversubscribe -np "$ranks" --mca btl self,vader,tcp "$kiln" "${common[@]}" --strategy sync \
    --out "$out/$name.json" "$@" >/dev/null
}
run overlap
run no-overlap --no-overlap
run fp16 --fp16-allreduce
run ring --allreduce ring
run small-buckets --bucket-mb 1

python3 - "$out" "$model" "$batch" "$ranks" "$threads" <<'PY'
import json, sys
out, model, batch, ranks, threads = sys.argv[1:]
def load(n):
    return json.load(open(f"{out}/{n}.json"))["runs"][0]
one = load("single")
print(f"{model} batch {batch} per rank, {threads} thread(s) per rank, {ranks} ranks (mpirun, shared memory)")
print(f"{'configuration':<28} {'ms/step':>9} {'comm wait ms':>13} {'images/s':>10} {'vs 1 rank x N':>14}")
print(f"{'1 rank, no communication':<28} {one['ms_median']:>9.1f} {'-':>13} {one['images_per_s']:>10.1f} {'-':>14}")
for name, label in [("overlap", "sync, overlap"), ("no-overlap", "sync, no overlap"),
                    ("fp16", "sync, fp16 compression"), ("ring", "sync, kiln ring"),
                    ("small-buckets", "sync, 1 MB buckets")]:
    r = load(name)
    eff = r["aggregate_images_per_s"] / (int(ranks) * one["images_per_s"])
    print(f"{label:<28} {r['ms_median']:>9.1f} {r['comm_wait_ms']:>13.2f} {r['aggregate_images_per_s']:>10.1f} {eff:>13.1%}")
PY
