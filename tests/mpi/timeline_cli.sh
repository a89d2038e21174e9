#!/usr/bin/env bash
# `kiln train --timeline` on 2 ranks, then `kiln timeline merge`: one trace with a process row per
# rank, every rank's file on rank 0's clock; a file that is not a trace is refused by name.
#   tests/mpi/timeline_cli.sh build/tools/kiln      (ctest --test-dir build -L mpi -R timeline_cli)
set -euo pipefail
kiln=$(realpath "$1")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/kiln-timeline-XXXXXX)
trap 'rm -rf "$work"' EXIT
mpirun -np 2 "$kiln" train --model mnist-cnn --data synthetic:1x28x28:10:256 --batch 16 --workers 0 --threads 1 \
  --quiet --strategy sync --epochs 1 --timeline "$work/trace.json" >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
for r in 0 1; do
  grep -q '"clock":"rank 0'"'"'s"' "$work/trace.rank$r.json" || { echo "FAIL: rank $r's trace is not on rank 0's clock"; exit 1; }
done
"$kiln" timeline merge --out "$work/merged.json" "$work/trace.json" | tee "$work/merge.txt"
grep -q "of 2 rank(s)" "$work/merge.txt" || { echo "FAIL: the merge did not take both ranks' files"; exit 1; }
rows=$(grep -o '"name":"process_name"' "$work/merged.json" | wc -l)
[[ $rows == 2 ]] || { echo "FAIL: $rows process rows, want 2"; exit 1; }
echo '{"nope": 1}' >"$work/junk.json"
if "$kiln" timeline merge --out "$work/m2.json" "$work/trace.rank0.json" "$work/junk.json" 2>"$work/err.txt"; then
  echo "FAIL: a file that is not a trace was merged"; exit 1
fi
grep -q "junk.json' is not a Chrome trace" "$work/err.txt" || { cat "$work/err.txt"; echo "FAIL: no error naming the file"; exit 1; }
echo PASS
