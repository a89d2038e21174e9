#!/usr/bin/env bash
# run.sh: starts a throw-away one-node SLURM cluster on this machine (munged, slurmctld, slurmd,
# all under a temp dir, on free ports), runs one job through it with srun and/or sbatch, checks
# its output against regexes, and shuts everything down again, even on failure or Ctrl-C.
#
#   tests/slurm/run.sh [--ntasks N] [--mode srun|sbatch|both] [--mpi pmix|pmi2|none]
#                      [--expect REGEX]... [--srun-arg ARG]... [--batch-launch srun|mpirun]
#                      [--timeout S] [--keep] -- COMMAND [ARGS...]
#   tests/slurm/run.sh [--ntasks N] --mode sbatch --batch-script FILE [--expect REGEX]... [--timeout S]
#   tests/slurm/run.sh [--ntasks N] --mode shell [--timeout S] -- COMMAND [ARGS...]
#
# --mode shell runs COMMAND once, on this machine, with the cluster's SLURM_CONF exported: a script
# that drives srun itself (tests/mpi/stop.sh signals a rank of an srun job); its exit status is the
# test's, its output is checked against --expect like a job's.
# --batch-script submits FILE as it is (its own #SBATCH lines apply, then -N1 -n N --time and
# --output from here override theirs) instead of the generated script; no command after `--`
# then. The deploy/jobs/slurm templates are checked this way (tests/deploy/slurm_template.sh).
# The sbatch job's script launches the command with `srun` (default) or Open MPI's `mpirun`.
# --srun-arg adds an option to both srun lines (e.g. --label: "R: " before each rank's lines);
# --timeout bounds each job (default 30 s); --keep leaves the temp dir (config, logs) for a look.
# The job runs in the current directory with this environment (srun's default --export=ALL).
# Exit: 0 every job ran and its output matched every --expect regex (grep -E, each must match
# some line, checked separately for the srun and the sbatch run); 1 a job failed or did not match,
# or the cluster did not come up (a daemon exited, the node never went idle, munge failed);
# 77 (CTest's SKIP_RETURN_CODE, "SKIPPED: <reason>" printed) only where SLURM cannot be tried:
# slurm-wlm's programs missing, or not root. With CI=true missing programs fail (exit 1)
# instead: tools/install-deps.sh --test installs slurm-wlm (tests/support/skip.sh).
# The CTest test: `ctest --test-dir build -R slurm`.
# SLURM 22.05 (Debian 12 slurm-wlm) with Open MPI 4.1: --mpi=pmix direct launch works; pmi2
# does not (Debian's Open MPI has only its PMIx client: MPI_Init fails "not built with SLURM's
# PMI support"); --mpi none suits non-MPI commands.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
ntasks=2
mode=both
mpi=pmix
timeout_s=30
keep=0
expects=()
extra=()
batch_launch=srun
batch_script=""
while (($#)); do
  case "$1" in
    --ntasks) ntasks="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --mpi) mpi="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --srun-arg) extra+=("$2"); shift 2 ;;
    --batch-launch) batch_launch="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --batch-script) batch_script="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) echo "run.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [[ -n $batch_script ]]; then
  if [[ $mode != sbatch || ! -f $batch_script ]]; then
    echo "run.sh: --batch-script needs --mode sbatch and an existing file ('$batch_script')" >&2
    exit 2
  fi
elif (($# == 0)); then
  echo "run.sh: no job command after --" >&2
  exit 2
fi
job=("$@")

# shellcheck source=tests/support/skip.sh
source "$here/../support/skip.sh"
# After the checks below, a cluster that does not come up is a failure, never a skip.
fail_start() { echo "FAIL: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || skip_missing python3 "python3 not found (it picks free ports)"
for b in munged mungekey slurmctld slurmd srun sbatch sinfo squeue scancel; do
  command -v "$b" >/dev/null 2>&1 ||
    skip_missing slurm-wlm "'$b' not found (Debian: apt-get install slurm-wlm, or tools/install-deps.sh --test)"
done
[[ $(id -u) -eq 0 ]] ||
  skip_unavailable "SLURM as root" "slurmd must run as root to launch job steps (running as $(id -un))"

slurm_major="$(slurmd -V 2>/dev/null | sed -n 's/^slurm[-a-z]* \([0-9]*\)[.].*/\1/p')"
# A run killed by SIGKILL (CTest's timeout) cannot clean up: the next run stops what such a run
# left (its owner pid gone) and removes its dir, unless it was kept (--keep) for a look.
sweep_stale() {
  local d owner p
  for d in /tmp/kiln-slurm.*; do
    [[ -f "$d/owner" ]] || continue
    owner=$(<"$d/owner")
    kill -0 "$owner" 2>/dev/null && continue
    for p in $(grep -lsxzF "SLURM_CONF=$d/slurm.conf" /proc/[0-9]*/environ); do
      p="${p#/proc/}"
      kill -KILL "${p%/environ}" 2>/dev/null
    done
    umount "$d/cgroup" 2>/dev/null
    [[ -f "$d/kept" ]] || rm -rf "$d"
  done
}
sweep_stale

tmp="$(mktemp -d /tmp/kiln-slurm.XXXXXX)"
echo $$ >"$tmp/owner"
mkdir -p "$tmp"/{munge,state,spool,log,pmix,jobs}
chmod 711 "$tmp" "$tmp/munge"  # munged wants its socket's dirs searchable by all, nothing more
export SLURM_CONF="$tmp/slurm.conf"  # clients and daemons (and the slurmstepds they fork) read it
pids=()

# Every process of this run other than the script itself: the daemons, slurmstepds, the job's
# tasks and the clients. They all carry this run's SLURM_CONF in their environment (exported
# below before anything starts; slurmd and srun pass it on), which no other process has.
ours() {
  local f p
  for f in $(grep -lsxzF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ); do
    p="${f#/proc/}"
    p="${p%/environ}"
    [[ $p == "$$" || $p == "$BASHPID" ]] || echo "$p"
  done
}

# Stops what this run started: the jobs (scancel, then a few seconds for slurmstepd to end their
# tasks), then whatever is left of ours() by pid (SIGTERM, SIGKILL after 3 s), then the temp dir.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local p left alive sig
  if [[ -S "$tmp/munge/munge.socket" ]] && kill -0 "${pids[1]:-none}" 2>/dev/null; then
    timeout 5 scancel --full --quiet --user=root >/dev/null 2>&1
    for _ in $(seq 30); do
      timeout 2 squeue -h -o %i 2>/dev/null | grep -q . || break
      sleep 0.1
    done
  fi
  for sig in TERM KILL; do
    left=$(ours)
    [[ -z $left ]] && break
    for p in $left; do kill -"$sig" "$p" 2>/dev/null; done
    for _ in $(seq 30); do
      alive=0
      for p in $left; do kill -0 "$p" 2>/dev/null && { alive=1; break; }; done
      ((alive)) || break
      sleep 0.1
    done
  done
  wait 2>/dev/null
  umount "$tmp/cgroup" 2>/dev/null
  if ((keep)); then touch "$tmp/kept"; echo "run.sh: kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show_logs() {
  local f
  for f in "$tmp"/log/*.log; do
    [[ -f "$f" ]] || continue
    echo "---- $(basename "$f") (last 40 lines)"
    tail -n 40 "$f"
  done
}

# Two free TCP ports (slurmctld, slurmd): the kernel picks them; several clusters may run at once.
read -r ctld_port slurmd_port < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
)

# munge: a key of our own and a daemon on our own socket, so the host's munge (if any) is untouched.
mungekey --create --keyfile="$tmp/munge/munge.key" >/dev/null 2>&1 ||
  fail_start "mungekey could not create a key in $tmp"
munged --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
  --seed-file="$tmp/munge/munged.seed" >/dev/null 2>&1 ||
  { show_logs; fail_start "munged would not start"; }
pids+=("$(cat "$tmp/munge/munged.pid")")

node="$(hostname -s)"
# slurmd -C prints what the hardware has; RealMemory must not exceed it.
mem="$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
cpus=$(( $(nproc) > ntasks ? $(nproc) : ntasks ))
sed -e "s|@TMP@|$tmp|g" -e "s|@NODE@|$node|g" -e "s|@CTLD_PORT@|$ctld_port|g" \
    -e "s|@SLURMD_PORT@|$slurmd_port|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|${mem:-1000}|g" \
    -e "s|@FIRST_JOB@|$(( (RANDOM % 9000 + 1000) * 100 ))|g" \
    "$here/slurm.conf.in" >"$SLURM_CONF"
sed -e "s|@TMP@|$tmp|g" "$here/mpi.conf.in" >"$tmp/mpi.conf"
# slurmd starts its cgroup plugin whatever the proctrack and task plugins are, and a chroot or
# container may have no /sys/fs/cgroup. Slurm 24 (Debian 13) turns it off (CgroupPlugin=disabled,
# cgroup.conf beside slurm.conf); Slurm 22.05 (Debian 12) has no such value, so it gets a tmpfs of
# the run's own as its mount point (CgroupMountpoint, "for development and testing"): it finds a
# cgroup v1 layout there and, with linuxproc tracking and no task plugin, never writes to it.
if ((${slurm_major:-0} >= 24)); then
  echo "CgroupPlugin=disabled" >"$tmp/cgroup.conf"
else
  mkdir -p "$tmp/cgroup"
  mount -t tmpfs -o size=1m kiln-slurm-cgroup "$tmp/cgroup" || fail_start "could not mount a tmpfs on $tmp/cgroup"
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n' "$tmp/cgroup" >"$tmp/cgroup.conf"
fi

# In sessions of their own (munged makes one itself): a Ctrl-C or CTest's signal to this process
# group must not kill them before the cleanup has cancelled the jobs through them.
setsid -w slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
setsid -w slurmd -D -N "$node" -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)

# Bounded wait (30 s) for the node to be idle; a daemon that died is reported at once.
state=""
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null ||
      { show_logs; tail -n 20 "$tmp"/log/*.out; fail_start "a daemon exited at start (logs above)"; }
  done
  state="$(timeout 3 sinfo -h -N -n "$node" -o %T 2>/dev/null)"
  [[ "$state" == idle ]] && break
  sleep 0.2
done
if [[ "$state" != idle ]]; then
  show_logs
  fail_start "node $node not idle after 30 s (state '${state:-none}'; logs above)"
fi
echo "run.sh: cluster up in $SECONDS s (node $node, CPUs=$cpus, ports $ctld_port/$slurmd_port)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"

check() {  # check LABEL FILE: every --expect regex must match a line of FILE
  local label="$1" file="$2" re ok=0
  echo "---- $label output"
  cat "$file"
  for re in "${expects[@]}"; do
    if ! grep -Eq -- "$re" "$file"; then
      echo "FAIL ($label): no line matches '$re'"
      ok=1
    fi
  done
  return $ok
}

# Runs a client command under `timeout` in the background and waits for it: a signal to this
# script then runs the cleanup trap at once instead of after the command ends.
run_bounded() {  # run_bounded OUTPUT COMMAND...
  local out="$1"
  shift
  timeout "$timeout_s" "$@" >"$out" 2>&1 &
  wait "$!"
}

failed=0
time_min=$(( timeout_s / 60 + 1 ))  # SLURM's own limit, a little past ours
srun_args=(-N1 -n "$ntasks" --mpi="$mpi" --time="$time_min" --kill-on-bad-exit=1 "${extra[@]}")
if [[ $mode == srun || $mode == both ]]; then
  echo "run.sh: srun ${srun_args[*]} ${job[*]}"
  run_bounded "$tmp/jobs/srun.out" srun "${srun_args[@]}" "${job[@]}"
  rc=$?
  if ((rc != 0)); then echo "FAIL (srun): exit $rc"; failed=1; fi
  check srun "$tmp/jobs/srun.out" || failed=1
fi
if [[ $mode == shell ]]; then
  echo "run.sh: ${job[*]}"
  run_bounded "$tmp/jobs/shell.out" env SLURM_CONF="$SLURM_CONF" "${job[@]}"
  rc=$?
  if ((rc != 0)); then echo "FAIL (shell): exit $rc"; failed=1; fi
  check shell "$tmp/jobs/shell.out" || failed=1
fi
if [[ $mode == sbatch || $mode == both ]]; then
  if [[ -n $batch_script ]]; then
    cp "$batch_script" "$tmp/jobs/batch.sh"
  else
  {
    echo "#!/bin/bash"
    if [[ $batch_launch == mpirun ]]; then
      # Open MPI's mpirun reads the allocation (SLURM_*) and starts its daemons with srun.
      printf 'mpirun --oversubscribe'
    else
      printf 'srun --mpi=%q --kill-on-bad-exit=1' "$mpi"
      ((${#extra[@]})) && printf ' %q' "${extra[@]}"
    fi
    printf ' %q' "${job[@]}"
    echo
  } >"$tmp/jobs/batch.sh"
  fi
  echo "run.sh: sbatch --wait -N1 -n $ntasks ${batch_script:-$(tail -n 1 "$tmp/jobs/batch.sh")}"
  run_bounded "$tmp/jobs/sbatch.submit" sbatch --wait --quiet -N1 -n "$ntasks" --time="$time_min" \
    --output="$tmp/jobs/sbatch.out" "$tmp/jobs/batch.sh"
  rc=$?
  if ((rc != 0)); then echo "FAIL (sbatch): exit $rc"; cat "$tmp/jobs/sbatch.submit"; failed=1; fi
  touch "$tmp/jobs/sbatch.out"
  check sbatch "$tmp/jobs/sbatch.out" || failed=1
fi
if ((failed)); then
  show_logs
  echo "run.sh: FAILED after $SECONDS s"
  exit 1
fi
echo "run.sh: passed in $SECONDS s"
exit 0
