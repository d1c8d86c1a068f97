#!/bin/bash
# rank_output.sh <dir> <program> [args...]
# Runs as one rank under mpirun (Open MPI 5, see ompi_env.sh's
# xccl_output_args): the program's stdout and stderr are copied to
# <dir>/1/rank.<r>/stdout and .../stderr (r: the MPI_COMM_WORLD rank) and
# still go to mpirun's merged output.  Exits with the program's status.
d=$1/1/rank.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:?not started by mpirun}}
shift
mkdir -p "$d"
"$@" > >(tee "$d/stdout") 2> >(tee "$d/stderr" >&2)
rc=$?
wait    # for the two tee (bash >= 5.1 waits for process substitutions)
exit "$rc"
