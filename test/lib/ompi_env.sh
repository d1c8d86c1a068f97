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
# shellcheck disable=SC2034  # the variables are for the caller
xccl_ompi_env() {
    local compdir scratch=$2 verb=$3 f
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
    ompi_base_args=(--allow-run-as-root --oversubscribe
        --mca mpi_yield_when_idle 1
        --mca mca_base_component_path "$component_path"
        --mca coll "xccl,tuned,basic,libnbc,self")
}
