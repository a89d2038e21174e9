# Sourced by tests/mpi/fault.sh and stop.sh: rank_pid RANK PATTERN prints the pid of the kiln
# process of MPI rank RANK whose command line holds PATTERN (the job's own directory), from the
# rank its launcher put in its environment (rank_var: OMPI_COMM_WORLD_RANK for mpirun, the
# default; SLURM_PROCID for srun); returns 1 when there is none.
rank_var=${rank_var:-OMPI_COMM_WORLD_RANK}
rank_pid() {
  for p in $(pgrep -f -- "$2"); do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == kiln ]] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "$rank_var=$1"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
