#!/usr/bin/env bash
# A rank that dies (SIGKILL) or stops answering (SIGSTOP: alive and silent, so mpirun notices
# nothing) must end the whole `kiln train` job, with kiln's own error naming that rank on the
# others:
#  - kill: the survivors see within a second that its process is gone (same host: /proc), "rank 1
#    (pid 4711 on node3: its process is gone (exited or killed)) has died", without waiting for
#    --comm-timeout and whether or not the launcher ends the job itself;
#  - stop: after --comm-timeout, every survivor names rank 1, following the chain of waits where
#    it waits for someone else (a ps worker waits for its server, which waits for rank 1): "timed
#    out after 8 s waiting for rank 2, which waits for rank 1 (no answer to a ping in 0.8 s; rank 1,
#    pid 4711 on node3: stopped (state T ...))"; rank 1, woken as the job ends, blames nobody else.
#  - stop-woken: as stop, but rank 1 is continued 0.3 s after --comm-timeout, while the others'
#    pings are still out (as a launcher's SIGCONT at job end can do): it answers, and is still the
#    one named, "rank 1 (rank 1 did not run for 8.3 s before it answered a ping: stopped or frozen)".
# The job then restarts from its last checkpoint (--resume latest) on two ranks.
#   tests/mpi/fault.sh build/tools/kiln kill|stop|stop-woken [sync|ps|async] [launcher]
#     ps, async: the last rank is the one server, ranks 0 and 1 the workers (async: kill only; the
#     server, never waiting long for any one worker, looks at the workers' processes each second)
#     launcher (kill only): mpirun keeps its default of ending the job when a rank dies, and
#     kiln's line must still come first; without it mpirun leaves that to kiln
#   ctest --test-dir build -L mpi -R fault
set -euo pipefail
kiln=$(realpath "$1")
fault=$2
strategy=${3:-sync}
launcher_kills=$([[ ${4:-} == launcher ]] && echo 1 || echo 0)
timeout_s=8
# The job must end within timeout_s + margin_s of the fault. The margin holds kiln's ping of the
# silent rank (timeout/10 = 0.8 s), the 0.5 s it gives the launcher before MPI_Abort, mpirun's
# teardown (about 1 s) and the collective having started up to a step before the fault (which
# only shortens the wait), with room for a loaded 2-core machine. Measured: 9.4 s (kill), 9 s (stop).
margin_s=10
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/kiln-fault-XXXXXX)
cleanup() {
  pkill -KILL -f -- "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

launcher_args=()
if [[ $fault == kill && $launcher_kills == 0 ]]; then
  # Open MPI 4 (ORTE): an MCA parameter; Open MPI 5 (PRRTE, Debian 13): a runtime option saying
  # the job handles a lost process itself.
  if mpirun --version 2>/dev/null | grep -Eq 'Open MPI\)? [0-4][.]'; then
    launcher_args=(--mca orte_abort_on_non_zero_status 0)
  else
    launcher_args=(--runtime-options recoverable)
  fi
fi

ps_args=()
[[ $strategy == sync ]] || ps_args=(--ps 1)
run() {  # run <ranks> <extra args...>
  local np=$1
  shift
  mpirun --oversubscribe "${launcher_args[@]}" -np "$np" --mca btl self,vader,tcp "$kiln" train --model mnist-cnn \
    --data synthetic:1x28x28:10:2048 --batch "${batch:-16}" --workers 0 --threads 1 --quiet --strategy "$strategy" "${ps_args[@]}" \
    --logdir "$work/run" --checkpoint-every 4 --comm-timeout "$timeout_s" --comm-warn 3 "$@"
}

# shellcheck source=tests/mpi/rank_pid.sh
source "$(dirname "$0")/rank_pid.sh"

run 3 --epochs 1000 >"$work/out.txt" 2>&1 &
job=$!
# Wait for the first checkpoint: training runs on every rank.
for _ in $(seq 1 600); do
  ls "$work"/run/ckpt-*.json >/dev/null 2>&1 && break
  kill -0 "$job" 2>/dev/null || { cat "$work/out.txt"; echo "FAIL: the job ended before the fault"; exit 1; }
  sleep 0.1
done
pid=$(rank_pid 1 "$work/run") || { cat "$work/out.txt"; echo "FAIL: rank 1 not found"; exit 1; }
start_ms=$(($(date +%s%N) / 1000000))
if [[ $fault == kill ]]; then kill -KILL "$pid"; else kill -STOP "$pid"; fi
fault_name=$([[ $fault == kill ]] && echo KILL || echo STOP)
echo "fault.sh: sent SIG$fault_name to rank 1 (pid $pid)"

# The job must end by itself within timeout + margin; a hang fails the test.
limit=$((timeout_s + margin_s))
deadline_ms=$((start_ms + limit * 1000))
woken=0
while kill -0 "$job" 2>/dev/null && (($(date +%s%N) / 1000000 < deadline_ms)); do
  # Wake the stopped rank once the others have given up on it, as an operator might: what it says
  # then must not blame them.
  # stop-woken: inside the others' ping window (it opens at --comm-timeout; the collective began
  # within a step, some ms, of the fault).
  wake=0
  if [[ $woken == 0 && $fault == stop ]]; then
    grep -q "timed out after" "$work/out.txt" && wake=1
  elif [[ $woken == 0 && $fault == stop-woken ]]; then
    (($(date +%s%N) / 1000000 - start_ms > timeout_s * 1000 + 300)) && wake=1
  fi
  if ((wake)); then
    kill -CONT "$pid" 2>/dev/null || true
    woken=1
  fi
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  cat "$work/out.txt"
  echo "FAIL: the job still runs ${limit} s (--comm-timeout $timeout_s + margin $margin_s) after rank 1 was ${fault}ed"
  exit 1
fi
rc=0
wait "$job" || rc=$?
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
elapsed=$((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000)))
cat "$work/out.txt"
echo "fault.sh: job ended with status $rc ${elapsed} s after the fault (limit ${limit} s)"
if ((${#launcher_args[@]} == 2)) && [[ ${launcher_args[0]} == --runtime-options ]]; then
  # A recoverable job's mpirun (Open MPI 5) exits 0 whatever its ranks did; that kiln ended the
  # job is its MPI_Abort, which mpirun reports.
  grep -Eq "^MPI_ABORT was invoked on rank [02]" "$work/out.txt" || { echo "FAIL: no rank called MPI_Abort"; exit 1; }
else
  [[ $rc -ne 0 ]] || { echo "FAIL: the job reported success"; exit 1; }
fi
fail() { echo "FAIL: $*"; exit 1; }
# kiln's own error, from a survivor, naming rank 1. mpirun's "exited on signal" line does not count.
if [[ $fault == kill ]]; then
  re="rank [02]: .*rank 1 \(pid [0-9]+ on [^:]+: its process is gone \(exited or killed\)\) has died"
  grep -Eq "$re" "$work/out.txt" || fail "no kiln error saying rank 1 died (want /$re/)"
  # No rank was stopped: none may say it was (Open MPI sends SIGCONT to every rank as it ends a job).
  ! grep -q "this rank itself" "$work/out.txt" || fail "a rank that ran throughout says it was stopped"
  # Found as a death, not waited out: the message above is the dead-peer check's, and the timeout's
  # own ("timed out after") must not be what ended the job. (No clock bound: a loaded machine may
  # take longer to notice, but not take the other path.)
  ! grep -q "timed out after" "$work/out.txt" || fail "the death was found only when the --comm-timeout passed"
  if ((launcher_kills)); then
    # mpirun's own notice may come as well, but kiln's line must be there first.
    first=$(grep -En "has died|mpirun noticed" "$work/out.txt" | head -1)
    [[ $first == *"has died"* ]] || fail "mpirun ended the job before kiln said anything"
  fi
else
  # Rank 1 is silent, or, continued by the launcher as the job ends, answers a late ping saying
  # it did not run.
  re="timed out after ${timeout_s} s waiting for (rank [0-9], which waits for )?rank 1 \((no answer to a ping in [0-9.]+ s; rank 1, pid [0-9]+ on [^:]+: stopped|rank 1 did not run for [0-9.]+ s before it answered a ping)"
  grep -Eq "$re" "$work/out.txt" || fail "no kiln error naming rank 1 as stopped (want /$re/)"
  grep -Eq "^kiln: rank [02] has waited [0-9]+ s for " "$work/out.txt" || fail "no warning before the timeout"
  # Nobody else is blamed: every timeout names rank 1 as the silent one, and rank 1 itself (woken
  # while the job ends) says it was the one stopped, or nothing.
  if grep -E "timed out after" "$work/out.txt" | grep -Ev "$re" | grep -q .; then fail "a timeout blames another rank"; fi
  if [[ $fault == stop-woken ]]; then
    grep -Eq "waiting for (rank [0-9], which waits for )?rank 1 \(rank 1 did not run for [0-9.]+ s before it answered a ping" \
      "$work/out.txt" || fail "rank 1, answering once woken, was not named from its answer"
  fi
  if grep -E "rank 1: .*(has died|timed out)" "$work/out.txt" | grep -v "this rank itself" | grep -q .; then
    fail "the stopped rank blames another"
  fi
  if grep -E "^kiln: rank 1 has waited" "$work/out.txt" | grep -q .; then fail "the stopped rank warns of a wait"; fi
fi
if grep -Eq "^test: loss|^stopped at step" "$work/out.txt"; then
  fail "a rank finished as if nothing happened"
fi

# Restart from the last checkpoint on two ranks now, keeping the global batch (sync: 3 x 16 = 2 x
# 24; ps: 2 workers x 16 = 1 x 32): it continues from that step (an elastic resume).
last=$(ls "$work"/run/ckpt-*.json | sort | tail -1)
step=$(basename "$last" .json | sed 's/ckpt-0*//')
restart_batch=$([[ $strategy == sync ]] && echo 24 || echo 32)
batch=$restart_batch run 2 --epochs 1000 --resume latest --max-steps $((step + 2)) >"$work/resume.txt" 2>&1 ||
  { cat "$work/resume.txt"; echo "FAIL: the restart failed"; exit 1; }
grep -q "stopped at step $((step + 2))" "$work/resume.txt" ||
  { cat "$work/resume.txt"; echo "FAIL: the restart did not continue from step $step"; exit 1; }
echo "fault.sh: restarted from step $step and went on to $((step + 2))"
echo "PASS"
