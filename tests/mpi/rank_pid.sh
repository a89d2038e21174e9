# Sourced by tests/mpi/fault.sh and stop.sh: rank_pid RANK PATTERN prints the pid of the kiln
# process of MPI rank RANK whose command line holds PATTERN (the job's own directory), from the
# rank Open MPI put in its environment; returns 1 when there is none.
rank_pid() {
  for p in $(pgrep -f -- "$2"); do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == kiln ]] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
