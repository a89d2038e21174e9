#!/usr/bin/env bash
# Submits the SLURM CPU benchmark template (deploy/jobs/slurm/bench_cpu.sbatch) with sbatch to the
# throw-away one-node SLURM of tests/slurm/run.sh, with a tiny benchmark (KILN_BENCH_ARGS), and
# checks what the job leaves in its folder: results/<job id>/bench.json (valid, the run asked
# for), bench.csv, kiln-info.json, job.log. Exit 77 (skipped, "SKIPPED: <reason>") only where
# run.sh skips: slurm-wlm missing (a failure with CI=true) or not root; a cluster that does not
# come up fails.
#   tests/deploy/slurm_template.sh build/tools/kiln        (ctest -R deploy.slurm_bench_cpu)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
kiln="$(realpath "$1")"
template="$root/deploy/jobs/slurm/bench_cpu.sbatch"

work="$(mktemp -d /tmp/kiln-deploy.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# The job gets this environment (sbatch's default --export=ALL) and runs in this directory.
export KILN="$kiln"
export KILN_BENCH_ARGS="--model mnist-cnn --batch 2 --iters 1 --warmup 0 --mode forward"
unset KILN_RESULTS_DIR KILN_ROOT

bash "$root/tests/slurm/run.sh" --ntasks 1 --mode sbatch --timeout 30 --batch-script "$template" \
  --expect '^kiln bench: results in .*/results/[0-9]+$'
rc=$?
((rc == 0)) || exit "$rc"

fail() { echo "FAIL: $*"; exit 1; }
shopt -s nullglob
dirs=("$work"/results/*)
((${#dirs[@]} == 1)) || fail "expected one job folder under $work/results, found ${#dirs[@]}"
dir="${dirs[0]}"
[[ $(basename "$dir") =~ ^[0-9]+$ ]] || fail "job folder '$dir' is not named by a SLURM job id"
for f in bench.json bench.csv kiln-info.json job.log job.env; do
  [[ -s "$dir/$f" ]] || fail "$dir/$f missing or empty"
done
python3 - "$dir" <<'PY' || fail "result files of $dir do not hold what was asked for"
import csv, json, sys
d = sys.argv[1]
r = json.load(open(d + "/bench.json"))
runs = r["runs"]
assert len(runs) == 1, runs
run = runs[0]
assert run["model"] == "mnist-cnn" and run["batch"] == 2, run
assert run["images_per_s"] > 0, run
rows = list(csv.DictReader(open(d + "/bench.csv")))
assert len(rows) == 1 and rows[0]["model"] == "mnist-cnn", rows
info = json.load(open(d + "/kiln-info.json"))
assert info["schema"] == "kiln-info/1", info.get("schema")
env = open(d + "/job.env").read()
assert "SLURM_JOB_ID=" in env, env
print(f"job folder {d}: {run['model']} batch {run['batch']} {run['mode']} "
      f"{run['images_per_s']:.1f} images/s; kiln {info['kiln']['version']}")
PY
echo "deploy.slurm_bench_cpu: passed"
