# shellcheck shell=bash disable=SC2034,SC2054
# Shared by multinode_tests.sh and bench_multinode.sh (sourced, not run).
#
# How a job is launched on the simulated hosts of netns_cluster.sh:
#
# * mpirun runs on host h0, i.e. inside namespace <prefix>-h0 under
#   `unshare --uts --ipc --mount` with hostname h0 (mn_exec h0 ...).  It
#   cannot run in the caller's namespace: that namespace has no address on the
#   simulated network (by design nothing is configured outside the namespaces
#   the test makes), and the orted on h1 must connect back to mpirun over TCP.
# * The hostfile lists h0 and h1 by name (the hosts' private /etc/hosts
#   resolve them); h0 is mpirun's own hostname, so its ranks are forked
#   locally; for h1 Open MPI calls the plm_rsh_agent wrapper like ssh
#   (`rsh [options] h1 orted ...`), which starts orted in h1's namespaces.
#   No tree spawn (plm_rsh_no_tree_spawn): mpirun starts every orted itself.
# * Open MPI's out-of-band channel and the TCP BTL are pinned to the
#   simulated link's subnet (oob_tcp_if_include, btl_tcp_if_include);
#   btl self,vader,tcp with pml ob1 (the UCX PML is not wanted: the point-to-
#   point traffic must take the shaped link like the collectives do).
# * xccl's own UCP context uses UCX transports posix,cma,tcp,self: between
#   hosts only tcp is reachable (UCX 1.13 tells machines apart by hostname and
#   MAC addresses, both private to a simulated host; see netns_cluster.sh).
#   UCX_NET_DEVICES=xmn0 (forwarded with -x) keeps UCX's tcp on the shaped
#   link; it works without it too, but then UCX may also use lo.
# * Rails (XCCLMN_RAILS=R > 1, see netns_cluster.sh): every rank is started
#   through the wrapper <state>/rail-exec (array mn_launch, to be put in front
#   of the program), which sets UCX_NET_DEVICES=xmn<local rank % R>: xccl's
#   UCX tcp traffic of local rank i then leaves on rail i (its listening
#   address and the route to a peer's rail-i address are both on xmn<i>), as
#   with one NIC per GPU.  The TCP BTL may use every rail (btl_tcp_if_include
#   <A.B>.0.0/16: ob1 stripes large messages over all its interfaces); the
#   out-of-band channel stays on rail 0.  With R=1, mn_launch is empty and
#   the arguments are exactly those above.
#
# Expects: netns_cluster.sh sourced, a cluster up (mn_up).
# Provides: mn_component_path, mn_mpirun_args (arrays mn_args, mn_launch),
# mn_tx_bytes, mn_rail_bytes.

# Component path with Open MPI's own directory first, then the xccl under
# test (test/lib/ompi_env.sh: a private directory of links when an
# installed xccl would shadow it).  mn_component_path <compdir> <scratch dir>
# shellcheck source=SCRIPTDIR/../lib/ompi_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/ompi_env.sh"
mn_component_path() {
    xccl_ompi_env "$1" "$2" testing
    echo "$component_path"
}

# The mpirun arguments every multi-node job needs (into array mn_args), and
# what goes in front of the program (array mn_launch: empty with one rail,
# else the rail wrapper):
#     mpirun "${mn_args[@]}" -np N ... "${mn_launch[@]}" prog args
# mn_mpirun_args <component path>
mn_mpirun_args() {
    local rails=${XCCLMN_RAILS:-1}
    mn_args=(--allow-run-as-root --oversubscribe
        --hostfile "$XCCLMN_HOSTFILE"
        --mca plm_rsh_agent "$XCCLMN_RSH"
        --mca plm_rsh_no_tree_spawn 1
        --mca oob_tcp_if_include "$XCCLMN_CIDR"
        --mca btl_tcp_if_include "${XCCLMN_RAILS_CIDR:-$XCCLMN_CIDR}"
        --mca btl self,vader,tcp
        --mca pml ob1
        --mca mpi_yield_when_idle 1
        --mca mca_base_component_path "$1"
        -x UCX_NET_DEVICES="$XCCLMN_IFACE")
    mn_launch=()
    if [[ $rails -gt 1 ]]; then
        cat >"$XCCLMN_STATE/rail-exec" <<EOF
#!/bin/sh
# Rail of this rank: local rank modulo $rails (UCX tcp of xccl on xmn<rail>).
rail=\$(( \${OMPI_COMM_WORLD_LOCAL_RANK:-0} % $rails ))
UCX_NET_DEVICES=xmn\$rail
export UCX_NET_DEVICES
exec "\$@"
EOF
        chmod 755 "$XCCLMN_STATE/rail-exec"
        mn_launch=("$XCCLMN_STATE/rail-exec")
    fi
}

# Bytes host h0 has sent on the simulated link (rail 0) so far.
mn_tx_bytes() {
    mn_exec h0 cat "/sys/class/net/$XCCLMN_IFACE/statistics/tx_bytes" 2>/dev/null || echo 0
}

# Bytes sent per host and rail so far, one line "hN xmnR <tx_bytes>" each.
mn_rail_bytes() {
    local h dev
    for h in $XCCLMN_HOSTS; do
        for dev in ${XCCLMN_RAIL_IFACES:-$XCCLMN_IFACE}; do
            echo "$h $dev $(mn_exec "$h" cat "/sys/class/net/$dev/statistics/tx_bytes" 2>/dev/null || echo 0)"
        done
    done
}
