# Debian roots made with debootstrap, for test/ompi5/run_trixie.sh and
# test/deb/deb_check.sh (sourced; bash, root).  Every root is registered
# and, at exit (also on failure or signal), the processes still running in
# it are killed, everything mounted below it is unmounted, deepest first,
# and it is deleted, unless chroot_keep=1 (it is still unmounted then).
#
#   chroot_init TAG             messages start with "TAG: "; sets the traps
#   chroot_new ROOT             registers ROOT; a root left by an interrupted
#                               run there is unmounted and deleted first
#   chroot_adopt ROOT           registers a root made otherwise (a copy)
#   chroot_debootstrap SUITE ROOT MIRROR LOG    a minbase root of SUITE
#   chroot_mount ROOT           /proc, /sys, a fresh /dev/shm, /dev/pts, the
#                               host's resolv.conf, this hostname in
#                               /etc/hosts (what mpirun needs)
#   chroot_bind_ro DIR ROOT     DIR at the same path inside, read-only
#   chroot_run ROOT LOG SCRIPT  bash -c SCRIPT inside (set -euo pipefail, a
#                               clean environment), output to LOG; on
#                               failure its last lines, status 1
#   chroot_release ROOT         kill, unmount and delete ROOT now
# The caller's EXIT trap, if it needs one, is chroot_exit_hook (a function
# it defines; run before the roots go).

chroot_tag=chroot
chroot_keep=${chroot_keep:-0}
chroot_roots=()
chroot_mounted=()

chroot_say() { echo "$chroot_tag: $*"; }

# Processes still running inside a root (an mpirun daemon that outlived a
# timeout) would keep its mounts busy: they can only be ours.
chroot_kill_inside() {
    local root=$1 p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        if [[ $r == "$root" || $r == "$root"/* ]]; then
            kill -9 "${p#/proc/}" 2>/dev/null || true
        fi
    done
}

# Unmounts what was mounted below ROOT (recorded or not: ip netns add binds
# /run/netns), deepest first; status 1 when something is left.
chroot_unmount() {
    local root=$1 i m
    local -a keep=()
    for ((i = ${#chroot_mounted[@]} - 1; i >= 0; i--)); do
        m=${chroot_mounted[i]}
        if [[ $m == "$root"/* ]]; then
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
                echo "$chroot_tag: could not unmount $m" >&2
        fi
    done
    for m in "${chroot_mounted[@]}"; do
        [[ $m == "$root"/* ]] || keep+=("$m")
    done
    chroot_mounted=("${keep[@]}")
    while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
            echo "$chroot_tag: could not unmount $m" >&2
    done < <(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
    if grep -q " $root/" /proc/mounts; then
        echo "$chroot_tag: mounts left under $root:" >&2
        grep " $root/" /proc/mounts >&2
        return 1
    fi
}

chroot_release() {
    local root=$1 rc=0 r
    local -a keep=()
    chroot_kill_inside "$root"
    chroot_unmount "$root" || rc=1
    # never delete through a mount
    if [[ $rc -eq 0 && $chroot_keep -eq 0 && -d $root ]]; then
        rm -rf --one-file-system "$root"
    fi
    for r in "${chroot_roots[@]}"; do
        [[ $r == "$root" ]] || keep+=("$r")
    done
    chroot_roots=("${keep[@]}")
    return "$rc"
}

chroot_cleanup() {
    local rc=$? r
    trap - EXIT INT TERM
    set +e
    declare -F chroot_exit_hook >/dev/null && chroot_exit_hook
    for r in "${chroot_roots[@]}"; do
        chroot_release "$r" || rc=1
    done
    exit "$rc"
}

chroot_init() {
    chroot_tag=$1
    trap chroot_cleanup EXIT
    trap 'echo "$chroot_tag: interrupted" >&2; exit 130' INT TERM
}

chroot_new() {
    local root=$1
    if [[ -d $root ]]; then
        chroot_kill_inside "$root"
        chroot_unmount "$root" || { chroot_say "old mounts under $root"; return 1; }
        rm -rf --one-file-system "$root"
    fi
    mkdir -p "$root"
    chroot_roots+=("$root")
}

chroot_adopt() {
    chroot_roots+=("$1")
}

chroot_debootstrap() {
    local suite=$1 root=$2 mirror=$3 log=$4
    [[ -e /usr/share/debootstrap/scripts/$suite ]] || { chroot_say "this debootstrap does not know $suite"; return 1; }
    if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1; then
        tail -n 30 "$log"
        chroot_say "debootstrap $suite failed (log: $log)"
        return 1
    fi
}

chroot_do_mount() {     # chroot_do_mount <target> <mount arguments...>
    local target=$1
    shift
    mkdir -p "$target"
    mount "$@" "$target" || { chroot_say "mount $* $target failed"; return 1; }
    chroot_mounted+=("$target")
}

chroot_mount() {
    local root=$1 hostname
    chroot_do_mount "$root/proc" -t proc proc || return 1
    chroot_do_mount "$root/sys" -t sysfs sysfs || return 1
    # a fresh, empty /dev/shm (Open MPI's and UCX's shared-memory segments)
    chroot_do_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs || return 1
    chroot_do_mount "$root/dev/pts" -t devpts -o newinstance,ptmxmode=0666 devpts || return 1
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    hostname=$(hostname)
    grep -q "$hostname" "$root/etc/hosts" 2>/dev/null || echo "127.0.1.1 $hostname" >>"$root/etc/hosts"
}

chroot_bind_ro() {
    local dir=$1 root=$2
    chroot_do_mount "$root$dir" --bind "$dir" || return 1
    mount -o remount,bind,ro "$root$dir" || { chroot_say "remount $root$dir read-only failed"; return 1; }
}

chroot_run() {
    local root=$1 log=$2 script=$3
    if ! chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            DEBIAN_FRONTEND=noninteractive CI="${CI:-}" \
            bash -c "set -euo pipefail; $script" >"$log" 2>&1; then
        chroot_say "last lines of $log:"
        tail -n 60 "$log" | sed 's/^/   | /'
        return 1
    fi
}
