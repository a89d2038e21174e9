#!/usr/bin/env bash
# A rank that dies (SIGKILL) or stops answering (SIGSTOP: alive and silent, so mpirun notices
# nothing) must end the whole `kiln train --strategy sync` job within its --comm-timeout, with an
# error naming the rank; the job then restarts from its last checkpoint (--resume latest).
#   tests/mpi/fault.sh build/tools/kiln kill|stop      (ctest --test-dir build -L mpi -R fault)
set -euo pipefail
kiln=$(realpath "$1")
fault=$2
timeout_s=8
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/kiln-fault-XXXXXX)
cleanup() {
  pkill -KILL -f -- "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

run() {  # run <ranks> <extra args...>
  local np=$1
  shift
  mpirun --oversubscribe -np "$np" --mca btl self,vader,tcp "$kiln" train --model mnist-cnn \
    --data synthetic:1x28x28:10:2048 --batch 16 --workers 0 --threads 1 --quiet --strategy sync \
    --logdir "$work/run" --checkpoint-every 4 --comm-timeout "$timeout_s" --comm-warn 3 "$@"
}

# The pid of rank $1 of our job: the kiln process whose environment carries that rank.
rank_pid() {
  for p in $(pgrep -f -- "$work/run"); do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == kiln ]] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

run 3 --epochs 1000 >"$work/out.txt" 2>&1 &
job=$!
# Wait for the first checkpoint: training runs on every rank.
for _ in $(seq 1 600); do
  ls "$work"/run/ckpt-*.json >/dev/null 2>&1 && break
  kill -0 "$job" 2>/dev/null || { cat "$work/out.txt"; echo "FAIL: the job ended before the fault"; exit 1; }
  sleep 0.1
done
pid=$(rank_pid 1) || { cat "$work/out.txt"; echo "FAIL: rank 1 not found"; exit 1; }
start=$(date +%s.%N)
if [[ $fault == kill ]]; then kill -KILL "$pid"; else kill -STOP "$pid"; fi
echo "fault.sh: sent SIG${fault^^} to rank 1 (pid $pid)"

# The job must end by itself within the timeout (plus launch slack); a hang fails the test.
limit=$((timeout_s + 40))
for _ in $(seq 1 $((limit * 10))); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  cat "$work/out.txt"
  echo "FAIL: the job still runs ${limit} s after rank 1 was ${fault}ed"
  exit 1
fi
rc=0
wait "$job" || rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$work/out.txt"
echo "fault.sh: job ended with status $rc ${elapsed} s after the fault"
[[ $rc -ne 0 ]] || { echo "FAIL: the job reported success"; exit 1; }
if [[ $fault == stop ]]; then
  # kiln's own error: the survivors name the silent rank and the collective.
  grep -Eq "timed out after [0-9.]+ s waiting for rank(s)? 1\b" "$work/out.txt" ||
    { echo "FAIL: no timeout error naming rank 1"; exit 1; }
  grep -q "has waited" "$work/out.txt" || { echo "FAIL: no warning before the timeout"; exit 1; }
else
  # The launcher or kiln names the dead rank.
  grep -Eq "rank 1\b" "$work/out.txt" || { echo "FAIL: nothing names rank 1"; exit 1; }
fi

# Restart from the last checkpoint (two ranks now): it continues from that step.
last=$(ls "$work"/run/ckpt-*.json | sort | tail -1)
step=$(basename "$last" .json | sed 's/ckpt-0*//')
run 2 --epochs 1000 --resume latest --max-steps $((step + 2)) >"$work/resume.txt" 2>&1 ||
  { cat "$work/resume.txt"; echo "FAIL: the restart failed"; exit 1; }
grep -q "stopped at step $((step + 2))" "$work/resume.txt" ||
  { cat "$work/resume.txt"; echo "FAIL: the restart did not continue from step $step"; exit 1; }
echo "fault.sh: restarted from step $step and went on to $((step + 2))"
echo "PASS"
