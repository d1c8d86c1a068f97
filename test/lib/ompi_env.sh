# shellcheck shell=bash
# Sourced (bash) by test/mpi/run_mpi_tests.sh, test/gpu/run_gpu_tests.sh,
# test/gpu/bench_gpu.sh and test/multinode/mn_common.sh: how they load the
# xccl under test into the stock Open MPI.
#
# xccl_ompi_env <compdir> <scratch dir> <verb>
#   Sets
#     ompi_dir        Open MPI's own component directory ($OMPI_COMPONENT_DIR,
#                     default /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3)
#     component_path  "$ompi_dir:<compdir>" (absolute): Open MPI's components first,
#                     then the xccl under test.  Open MPI loads the first
#                     mca_coll_xccl.so it finds on the path, so when
#                     $ompi_dir has an installed xccl, which would shadow the
#                     one under test: <scratch dir>/components, a private
#                     directory of links to the stock components plus the one
#                     under test (and a note "<verb> <compdir> through ..."
#                     on stderr).
#     ompi_base_args  (array) the mpirun arguments every run takes: root,
#                     oversubscription, yielding ranks, that component path,
#                     xccl first in the coll list.
#     ompi_major      the major version of the Open MPI that mpirun runs
#   and exports OMPI_MCA_coll_xccl_picks_file=none: a run's trials do not
#   depend on the picks of earlier runs (those that test the file set it).
#     ompi_bind_args  (array) what a run that binds ranks (rankfile) adds:
#                     nothing for 4.1; for 5.0 --bind-to core:overload-allowed,
#                     since its prterun binds nothing with --oversubscribe
#
# xccl_output_args <dir> <mpirun args and program...>
#   Sets output_args (array): the mpirun arguments and program given, so
#   that each rank's output is also written to
#   <dir>/<job>/rank.<r>/{stdout,stderr}.  Open MPI 4.1: --output-filename
#   <dir> in front.  Open MPI 5.0.7's prterun cannot do it: with
#   --output-filename, --output dir= or file= it writes only the stream a
#   rank writes first ("PMIX_ERR_EXISTS ... pmix_iof.c"), and with
#   merge-stderr-to-stdout,dir= a rank's file holds other ranks' lines.  So
#   there every rank writes its own files: test/lib/rank_output.sh <dir> is
#   put in front of the program (the first argument that is a path to an
#   executable file, and the first after each MPMD ':'; none, e.g.
#   hostname: no per-rank files).
#
# xccl_rankfile_dir <dir>
#   Sets ompi_rankfile_dir: where to write a rankfile: <dir>, except for
#   Open MPI 5 when that path has a '-' (prterun 3.0.8 then rejects
#   --rankfile's map-by qualifier "file=<path>"): a new directory
#   /tmp/xcclrank.XXXXXX, which the caller removes.
#
# Open MPI 5 (the PMIx client in each rank) also scans
# mca_base_component_path and prints "process_repository_item ... has bad
# prefix" for every file not named pmix_mca_*: noise, harmless.
# shellcheck disable=SC2034  # the variables are for the caller
xccl_ompi_env() {
    local compdir scratch=$2 verb=$3 f
    xccl_ompi_major
    compdir=$(cd "$1" && pwd)
    ompi_dir=${OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
    component_path="$ompi_dir:$compdir"
    if [[ -e $ompi_dir/mca_coll_xccl.so ]]; then
        component_path=$scratch/components
        mkdir -p "$component_path"
        for f in "$ompi_dir"/*; do
            [[ $(basename "$f") == mca_coll_xccl.* ]] || ln -sf "$f" "$component_path/"
        done
        ln -sf "$compdir/mca_coll_xccl.so" "$component_path/mca_coll_xccl.so"
        echo "note: $ompi_dir has an installed xccl; $verb $compdir through $component_path" >&2
    fi
    ompi_bind_args=()
    ((ompi_major < 5)) || ompi_bind_args=(--bind-to core:overload-allowed)
    export OMPI_MCA_coll_xccl_picks_file=none
    ompi_base_args=(--allow-run-as-root --oversubscribe
        --mca mpi_yield_when_idle 1
        --mca mca_base_component_path "$component_path"
        --mca coll "xccl,tuned,basic,libnbc,self")
}

# Sets ompi_major (once) from `mpirun --version` ("mpirun (Open MPI) 5.0.7").
xccl_ompi_major() {
    [[ -n ${ompi_major:-} ]] && return 0
    local -a run
    read -r -a run <<<"${MPIRUN:-mpirun}"
    ompi_major=$("${run[@]}" --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
    ompi_major=${ompi_major:-4}
}

xccl_output_args() {
    local dir=$1 a placed=0
    shift
    xccl_ompi_major
    if ((ompi_major < 5)); then
        output_args=(--output-filename "$dir" "$@")
        return 0
    fi
    output_args=()
    for a in "$@"; do
        if ((!placed)) && [[ $a == */* && -f $a && -x $a ]]; then
            output_args+=("$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rank_output.sh" "$dir")
            placed=1
        fi
        output_args+=("$a")
        [[ $a != : ]] || placed=0    # MPMD: the next application's program
    done
    # (a program on PATH, e.g. hostname: no per-rank files)
    return 0
}

xccl_rankfile_dir() {
    xccl_ompi_major
    ompi_rankfile_dir=$1
    if ((ompi_major >= 5)) && [[ $1 == *-* ]]; then
        ompi_rankfile_dir=$(mktemp -d /tmp/xcclrank.XXXXXX)
    fi
}
