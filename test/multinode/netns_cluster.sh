#!/usr/bin/env bash
# Simulated hosts on one machine, for multi-node tests of xccl: network
# namespaces joined by veth, each "host" with its own hostname (UTS
# namespace), System V IPC (IPC namespace), /dev/shm and boot id (mount
# namespace), and an inter-host link shaped with tc to a fixed rate (and
# delay, where the kernel has sch_netem) so that results are repeatable.
#
# usage:
#   netns_cluster.sh check                 exit 0 if usable, else "SKIP: ..." and 77
#   netns_cluster.sh run [NHOSTS] -- CMD…  bring a cluster up, run CMD on host h0
#                                          with the variables below set, tear it
#                                          down (always: also on failure, Ctrl-C)
#   netns_cluster.sh up [NHOSTS]           bring one up; prints its state directory
#   netns_cluster.sh down STATE            tear it down
#   netns_cluster.sh exec STATE HOST CMD…  run CMD on HOST (h0, h1, … or its address)
#   netns_cluster.sh rsh STATE [ssh options] HOST CMD…
#                                          what the plm_rsh_agent wrapper calls
#
# Or source it: functions mn_check, mn_up [NHOSTS], mn_down, mn_exec HOST CMD…
# (mn_up installs `trap mn_down EXIT INT TERM` unless XCCLMN_NO_TRAP=1).
#
# Topology.  NHOSTS = 2 (default): one veth pair, h0 <-> h1.  NHOSTS >= 3: a
# switch namespace <prefix>-sw holding a Linux bridge, one veth per host.  In
# every host the link is called xmn0 and has address 10.231.0.<i+1>/24
# (XCCLMN_SUBNET); there are no addresses outside the namespaces made here.
# Both ends of the pair are created directly inside their namespaces, so
# nothing ever appears in the caller's namespace.
#
# Rails (XCCLMN_RAILS=R, default 1): R independent links per host, like one
# NIC per GPU on a DGX-type machine: xmn0 .. xmn<R-1>, link r in its own
# subnet (third octet of XCCLMN_SUBNET + r: 10.231.r.0/24, host i has
# 10.231.r.<i+1>), each shaped on its own (one qdisc per link, same rate).
# Two hosts: R veth pairs; three or more: one bridge per rail in the switch
# namespace (br<r>; ports p<i> for rail 0 as with one rail, r<r>p<i> for
# the others).  /etc/hosts names keep the rail-0 addresses; the kernel
# routes by destination subnet, so a connection to a host's rail-r address
# leaves on xmn<r>.  With R=1 nothing differs from a build without rails.
#
# Each host's egress on every xmnR is shaped (switch ports are not):
#   netem rate $XCCLMN_RATE delay $XCCLMN_DELAY    if the kernel has netem,
#   tbf rate $XCCLMN_RATE burst $XCCLMN_BURST      otherwise (no delay then;
#                                                  a NOTE says so)
# XCCLMN_SHAPE=none leaves the link unshaped; =tbf forces tbf.
#
# Processes of a host run as
#   ip netns exec <prefix>-hN unshare --uts --ipc --mount sh -c '
#       hostname hN; mount --bind <own boot_id> /proc/sys/kernel/random/boot_id;
#       mount -t tmpfs tmpfs /dev/shm; mount --bind <hosts> /etc/hosts; exec …'
# --mount (beyond --uts --ipc): an IPC namespace does not separate POSIX
# shared memory (/dev/shm is a mount), and newer UCX versions can base the
# decision that two processes share a machine (and so may use the shared-
# memory transports posix and cma between them) on the boot id in
# /proc/sys/kernel/random/boot_id (ucs_get_system_id), which is then private
# to each host too.  UCX
# 1.13 (Debian 12) compares a hash of hostname and MAC addresses, which the
# UTS and network namespaces already make distinct (with only
# posix,cma,self UCX reports "Destination is unreachable" between hosts), so
# xccl's UCX traffic between hosts takes tcp over the shaped link.  The
# private /etc/hosts names h0, h1, … .
# The PID namespace stays shared (so that mpirun, orted and cleanup see
# every process).
#
# Variables set for CMD (run) / by mn_up:
#   XCCLMN_STATE     state directory (hostfile, wrapper, logs)
#   XCCLMN_HOSTFILE  Open MPI hostfile: "hN slots=$XCCLMN_SLOTS" per host
#   XCCLMN_RSH       wrapper for --mca plm_rsh_agent (called like ssh)
#   XCCLMN_IFACE     link name (xmn0), XCCLMN_CIDR its subnet
#   XCCLMN_RAILS     number of links per host (R); XCCLMN_RAIL_IFACES their
#                    names (xmn0 ... xmn<R-1>); XCCLMN_RAILS_CIDR a prefix
#                    covering all of them (R=1: XCCLMN_CIDR; else a /16)
#   XCCLMN_HOSTS     host names, space separated
#   XCCLMN_SHAPING   one line: what tc set up
#
# Parameters (environment): XCCLMN_PREFIX (default xcmn<pid>), XCCLMN_SUBNET
# (10.231.0), XCCLMN_RATE (10gbit), XCCLMN_DELAY (50us), XCCLMN_BURST (512kb),
# XCCLMN_LIMIT (netem/tbf queue, 4mb for tbf, packets for netem: 10000),
# XCCLMN_MTU (1500), XCCLMN_SLOTS (2), XCCLMN_RAILS (1).
#
# Exit status 77 with one line "SKIP: <reason>" when this cannot work here
# (not root, no `ip netns`, no unshare, no veth).

# ---------------------------------------------------------------------------

mn_self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

mn_skip() {
    echo "SKIP: $*"
    return 77
}

# Prerequisites.  Returns 0 or prints "SKIP: ..." and returns 77.
mn_check() {
    local cmd probe rc=0
    [[ $(id -u) -eq 0 ]] || { mn_skip "needs root (network namespaces)"; return; }
    for cmd in ip unshare tc mount hostname; do
        command -v "$cmd" >/dev/null 2>&1 || { mn_skip "no '$cmd' command"; return; }
    done
    probe=xcmnprobe$$
    if ! ip netns add "$probe" 2>/dev/null; then
        mn_skip "'ip netns add' does not work here"
        return
    fi
    if ! ip netns exec "$probe" ip link set lo up 2>/dev/null; then
        rc=1
        mn_skip "'ip netns exec' does not work here"
    elif ! ip link add xmpa netns "$probe" type veth peer name xmpb netns "$probe" 2>/dev/null; then
        rc=1
        mn_skip "cannot create veth pairs"
    elif ! ip netns exec "$probe" unshare --uts --ipc --mount sh -c \
        'hostname xcmnprobe && mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
        rc=1
        mn_skip "'unshare --uts --ipc --mount' does not work here"
    fi
    ip netns del "$probe" 2>/dev/null
    [[ $rc -eq 0 ]] || return 77
    return 0
}

mn_log() {
    [[ -n ${XCCLMN_QUIET:-} ]] || echo "netns_cluster: $*" >&2
}

# mn_up [NHOSTS]: creates the cluster, exports the XCCLMN_* variables.
mn_up() {
    local n=${1:-2} i ns state
    [[ $n =~ ^[0-9]+$ && $n -ge 2 && $n -le 16 ]] || { echo "netns_cluster: NHOSTS must be 2..16" >&2; return 2; }
    local prefix=${XCCLMN_PREFIX:-xcmn$$}
    local subnet=${XCCLMN_SUBNET:-10.231.0}
    local rate=${XCCLMN_RATE:-10gbit} delay=${XCCLMN_DELAY:-50us}
    local burst=${XCCLMN_BURST:-512kb} mtu=${XCCLMN_MTU:-1500}
    local slots=${XCCLMN_SLOTS:-2} shape=${XCCLMN_SHAPE:-auto}
    local rails=${XCCLMN_RAILS:-1} r dev
    [[ $rails =~ ^[0-9]+$ && $rails -ge 1 && $rails -le 8 ]] ||
        { echo "netns_cluster: XCCLMN_RAILS must be 1..8" >&2; return 2; }
    [[ $subnet =~ ^[0-9]+\.[0-9]+\.([0-9]+)$ && $((BASH_REMATCH[1] + rails - 1)) -le 255 ]] ||
        { echo "netns_cluster: XCCLMN_SUBNET must be A.B.C with C + XCCLMN_RAILS - 1 <= 255" >&2; return 2; }
    # Subnet (A.B.C) of rail r: C + r.
    local -a rsub=()
    for ((r = 0; r < rails; r++)); do
        rsub+=("${subnet%.*}.$((${subnet##*.} + r))")
    done

    state=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX") || return 1
    chmod 755 "$state"
    export XCCLMN_STATE=$state
    echo "$prefix" >"$state/prefix"
    : >"$state/namespaces"
    if [[ ${XCCLMN_NO_TRAP:-0} != 1 ]]; then
        trap 'mn_down' EXIT
        trap 'mn_down; trap - INT; kill -INT $$' INT
        trap 'mn_down; trap - TERM; kill -TERM $$' TERM
    fi

    local hosts=()
    for ((i = 0; i < n; i++)); do
        hosts+=("h$i")
    done
    {
        echo "127.0.0.1 localhost"
        for ((i = 0; i < n; i++)); do
            echo "$subnet.$((i + 1)) h$i"
        done
    } >"$state/hosts"

    # Namespaces, loopback up, a boot id of its own per host.
    for ((i = 0; i < n; i++)); do
        ns=$prefix-h$i
        ip netns add "$ns" || { mn_down; return 1; }
        echo "$ns" >>"$state/namespaces"
        ip netns exec "$ns" ip link set lo up || { mn_down; return 1; }
        printf '%08x-%04x-4%03x-8%03x-%012x\n' "$((0x5c0de000 + i))" "$(($$ & 0xffff))" "$i" "$i" "$i" \
            >"$state/boot_id.h$i"
        echo "h$i $ns $subnet.$((i + 1))" >>"$state/map"
    done

    # Links: per rail r, link xmn<r> in every host.
    local br port
    if [[ $n -ne 2 ]]; then
        ns=$prefix-sw
        ip netns add "$ns" || { mn_down; return 1; }
        echo "$ns" >>"$state/namespaces"
        ip netns exec "$ns" ip link set lo up || { mn_down; return 1; }
    fi
    for ((r = 0; r < rails; r++)); do
        dev=xmn$r
        if [[ $n -eq 2 ]]; then
            ip link add "$dev" netns "$prefix-h0" mtu "$mtu" type veth \
                peer name "$dev" netns "$prefix-h1" mtu "$mtu" || { mn_down; return 1; }
            continue
        fi
        br=br$r
        ip netns exec "$ns" ip link add "$br" type bridge &&
            ip netns exec "$ns" ip link set "$br" up || { mn_down; return 1; }
        for ((i = 0; i < n; i++)); do
            port=p$i
            [[ $r -eq 0 ]] || port=r${r}p$i
            ip link add "$port" netns "$ns" mtu "$mtu" type veth \
                peer name "$dev" netns "$prefix-h$i" mtu "$mtu" &&
                ip netns exec "$ns" ip link set "$port" master "$br" &&
                ip netns exec "$ns" ip link set "$port" up || { mn_down; return 1; }
        done
    done
    for ((i = 0; i < n; i++)); do
        ns=$prefix-h$i
        for ((r = 0; r < rails; r++)); do
            ip netns exec "$ns" ip addr add "${rsub[r]}.$((i + 1))/24" dev "xmn$r" &&
                ip netns exec "$ns" ip link set "xmn$r" up || { mn_down; return 1; }
        done
    done
    # The carrier comes up asynchronously (linkwatch): wait for it.
    local try up
    for ((try = 0; try < 50; try++)); do
        up=0
        for ((i = 0; i < n; i++)); do
            for ((r = 0; r < rails; r++)); do
                [[ $(ip netns exec "$prefix-h$i" cat "/sys/class/net/xmn$r/operstate" 2>/dev/null) == up ]] &&
                    up=$((up + 1))
            done
        done
        [[ $up -lt $((n * rails)) ]] || break
        sleep 0.1
    done
    [[ $up -eq $((n * rails)) ]] || mn_log "warning: only $up of $((n * rails)) links report operstate up"

    # Shaping, per host egress.
    local shaping="none"
    if [[ $shape != none ]]; then
        local use_netem=0 rails_note=""
        [[ $rails -eq 1 ]] || rails_note=" on each of $rails rails"
        if [[ $shape != tbf ]] &&
            ip netns exec "$prefix-h0" tc qdisc add dev xmn0 root netem \
                rate "$rate" delay "$delay" limit "${XCCLMN_LIMIT:-10000}" 2>/dev/null; then
            use_netem=1
            ip netns exec "$prefix-h0" tc qdisc del dev xmn0 root
        fi
        for ((i = 0; i < n * rails; i++)); do
            ns=$prefix-h$((i / rails))
            dev=xmn$((i % rails))
            if [[ $use_netem -eq 1 ]]; then
                ip netns exec "$ns" tc qdisc add dev "$dev" root netem \
                    rate "$rate" delay "$delay" limit "${XCCLMN_LIMIT:-10000}" || { mn_down; return 1; }
            elif ! ip netns exec "$ns" tc qdisc add dev "$dev" root tbf \
                rate "$rate" burst "$burst" limit "${XCCLMN_LIMIT:-4mb}" 2>/dev/null; then
                # Correctness does not need shaping: go on with a plain link.
                use_netem=-1
                break
            fi
        done
        if [[ $use_netem -eq -1 ]]; then
            shaping="none; NOTE: neither sch_netem nor sch_tbf in this kernel, link not shaped"
        elif [[ $use_netem -eq 1 ]]; then
            shaping="netem rate $rate delay $delay (each host's egress$rails_note)"
        else
            shaping="tbf rate $rate burst $burst (each host's egress$rails_note)"
            [[ $shape == tbf ]] ||
                shaping+="; NOTE: no sch_netem in this kernel, delay $delay not applied"
        fi
    fi
    echo "$shaping" >"$state/shaping"

    # Hostfile and the ssh-like wrapper for plm_rsh_agent.
    for ((i = 0; i < n; i++)); do
        echo "h$i slots=$slots"
    done >"$state/hostfile"
    cat >"$state/netns-rsh" <<EOF
#!/bin/sh
# ssh stand-in for Open MPI's plm_rsh_agent: runs the command on a simulated host.
exec bash '$mn_self' rsh '$state' "\$@"
EOF
    chmod 755 "$state/netns-rsh"

    export XCCLMN_HOSTFILE=$state/hostfile XCCLMN_RSH=$state/netns-rsh
    export XCCLMN_IFACE=xmn0 XCCLMN_CIDR=$subnet.0/24
    export XCCLMN_HOSTS="${hosts[*]}" XCCLMN_SHAPING=$shaping
    local ifaces=()
    for ((r = 0; r < rails; r++)); do
        ifaces+=("xmn$r")
    done
    export XCCLMN_RAILS=$rails XCCLMN_RAIL_IFACES="${ifaces[*]}"
    if [[ $rails -eq 1 ]]; then
        export XCCLMN_RAILS_CIDR=$XCCLMN_CIDR
        mn_log "up: $n hosts (${hosts[*]}), namespaces $prefix-*, link xmn0 $subnet.0/24, $shaping; state $state"
    else
        export XCCLMN_RAILS_CIDR=${subnet%.*}.0.0/16
        mn_log "up: $n hosts (${hosts[*]}), namespaces $prefix-*, $rails rails xmn0..xmn$((rails - 1)) ${rsub[0]}.0/24..${rsub[rails - 1]}.0/24, $shaping; state $state"
    fi
}

# mn_down [STATE]: kills what still runs in the namespaces, deletes them.
mn_down() {
    local state=${1:-${XCCLMN_STATE:-}} ns pids try
    [[ -n $state && -f $state/namespaces ]] || return 0
    while read -r ns; do
        [[ -n $ns ]] || continue
        for try in 1 2 3 4 5 6; do
            pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
            [[ -n ${pids// /} ]] || break
            if [[ $try -lt 4 ]]; then
                # shellcheck disable=SC2086
                kill -TERM $pids 2>/dev/null
            else
                # shellcheck disable=SC2086
                kill -KILL $pids 2>/dev/null
            fi
            sleep 0.5
        done
        ip netns del "$ns" 2>/dev/null
    done <"$state/namespaces"
    rm -rf "$state"
    [[ $state != "${XCCLMN_STATE:-}" ]] || unset XCCLMN_STATE
    mn_log "down: removed $(basename "$state")"
    return 0
}

# Host name or address -> "name namespace address" from the state's map.
mn_lookup() {
    local state=$1 host=$2
    awk -v h="$host" '$1 == h || $3 == h { print; found = 1; exit } END { exit !found }' "$state/map"
}

# mn_exec_in STATE HOST CMD...: CMD (argv) on HOST, in its namespaces.
mn_exec_in() {
    local state=$1 host=$2 entry name ns
    shift 2
    entry=$(mn_lookup "$state" "$host") || { echo "netns_cluster: unknown host $host" >&2; return 255; }
    read -r name ns _ <<<"$entry"
    exec ip netns exec "$ns" unshare --uts --ipc --mount sh -c '
        hostname "$1" &&
        mount --bind "$2/boot_id.$1" /proc/sys/kernel/random/boot_id &&
        mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
        mount --bind "$2/hosts" /etc/hosts || exit 255
        shift 2
        exec "$@"' netns-host "$name" "$state" "$@"
}

mn_exec() {
    (mn_exec_in "$XCCLMN_STATE" "$@")
}

# ssh stand-in: rsh STATE [options] HOST COMMAND... ; like ssh, the command
# words are joined with spaces and run by sh -c on the host.
mn_rsh() {
    local state=$1
    shift
    while [[ $# -gt 0 ]]; do
        case $1 in
            --) shift; break ;;
            -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;    # ssh options with an argument
            -*) shift ;;
            *) break ;;
        esac
    done
    [[ $# -ge 2 ]] || { echo "netns_cluster rsh: usage: rsh STATE [options] HOST COMMAND..." >&2; return 255; }
    local host=$1
    shift
    mn_exec_in "$state" "$host" sh -c "$*"
}

# ---------------------------------------------------------------------------

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -u
    sub=${1:-}
    shift || true
    case $sub in
        check)
            mn_check
            exit
            ;;
        up)
            mn_check || exit
            XCCLMN_NO_TRAP=1 mn_up "${1:-2}" || exit 1
            echo "$XCCLMN_STATE"
            ;;
        down)
            [[ $# -eq 1 ]] || { echo "usage: $0 down STATE" >&2; exit 2; }
            mn_down "$1"
            ;;
        exec)
            [[ $# -ge 3 ]] || { echo "usage: $0 exec STATE HOST CMD..." >&2; exit 2; }
            mn_exec_in "$@"
            ;;
        rsh)
            mn_rsh "$@"
            ;;
        run)
            nhosts=2
            if [[ $# -gt 0 && $1 != -- ]]; then
                nhosts=$1
                shift
            fi
            [[ ${1:-} == -- ]] && shift
            [[ $# -ge 1 ]] || { echo "usage: $0 run [NHOSTS] -- CMD..." >&2; exit 2; }
            mn_check || exit
            mn_up "$nhosts" || exit 1
            # In the background and waited for, so that a TERM sent to this
            # script alone runs the trap at once (bash defers traps until a
            # foreground child ends); the trap's mn_down ends the child.
            (mn_exec_in "$XCCLMN_STATE" h0 "$@") &
            rc=0
            wait $! || rc=$?
            exit "$rc"
            ;;
        *)
            sed -n '2,/^# ----/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
            exit 2
            ;;
    esac
fi
