#!/bin/bash
# rank_env.sh <rank> <VAR=value>... -- <program> [args...]
# Sets the variables only in MPI_COMM_WORLD rank <rank>, then runs the
# program: what `mpirun A : -np 1 -x VAR=value B` does, for Open MPI 5.0.7,
# whose mpirun crashes on every MPMD command line (ompi_env.sh).
r=$1
shift
vars=()
while [[ $# -gt 0 && $1 != -- ]]; do vars+=("$1"); shift; done
shift
if [[ ${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}} == "$r" ]]; then
    exec env "${vars[@]}" "$@"
fi
exec "$@"
