#!/bin/bash
# The suite against Open MPI 5.0 (Debian 13 "trixie": Open MPI 5.0.7,
# UCX 1.18), on a Debian 12 machine, as root:
#
#   1. debootstrap a minimal trixie root from Debian's archive, under the
#      build directory (nothing is cached anywhere else);
#   2. apt-get the build dependencies there (libopenmpi-dev, openmpi-bin,
#      libucx-dev, libhwloc-dev, check, build tools) and the source of the
#      installed Open MPI (its devel package lacks headers, see configure's
#      --with-ompi-src);
#   3. mount /proc, /sys, a fresh /dev/shm and /dev/pts into it, and this
#      machine's CUDA toolkit (/usr/local/cuda) read-only when it has one;
#   4. copy the source tree in and run autogen, configure --enable-werror,
#      make, make check (unit tests, MPI integration tests, stock-ops), make
#      install;
#   5. against the installed component (Open MPI's own directory, no path
#      tricks): ompi_info --param coll xccl --level 9 must list the
#      component and the same parameters as the Debian 12 build
#      (build/component, when there), and xccl_bench runs a short sweep at
#      np 2 and 4 (exit 4 = xccl was not active = failure);
#   6. unmount everything and delete the root, also on failure or signal.
#
# usage: test/ompi5/run_trixie.sh [--keep]   (--keep: leave the root for
#        debugging; it is still unmounted)
# Environment: XCCL_TRIXIE_MIRROR (default http://deb.debian.org/debian),
#   XCCL_TRIXIE_DIR (default <top>/build/trixie).
# make check runs in full; the multi-host test (network namespaces) reports
# SKIP inside the chroot ('ip netns exec' needs / to be a mount point) and
# is listed as skipped in the verdict; it runs in the Debian 12 suite.
# Prints "trixie: PASSED ..." or "trixie: FAILED at <stage> ..." and exits
# 0 / 1.  Logs: $XCCL_TRIXIE_DIR/logs/ (kept).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
keep=0
[[ ${1:-} == --keep ]] && keep=1
mirror=${XCCL_TRIXIE_MIRROR:-http://deb.debian.org/debian}
work=${XCCL_TRIXIE_DIR:-$top/build/trixie}
root=$work/root
logs=$work/logs
jobs=2

stage=setup
t_start=$(date +%s)
declare -a timings=()
mounted=()

fail() {
    echo "trixie: FAILED at $stage: $*"
    exit 1
}

# Processes still running inside the root (an mpirun daemon that outlived a
# timeout) would keep the mounts busy: they can only be ours.
kill_inside() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        if [[ $r == "$root" || $r == "$root"/* ]]; then
            kill -9 "${p#/proc/}" 2>/dev/null || true
        fi
    done
}

cleanup() {
    local rc=$? i m
    trap - EXIT INT TERM
    set +e
    kill_inside
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        m=${mounted[i]}
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
            echo "trixie: could not unmount $m" >&2
    done
    # and whatever the tests mounted inside (ip netns add binds /run/netns),
    # deepest first
    while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
            echo "trixie: could not unmount $m" >&2
    done < <(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
    # anything left mounted below the root (never delete through a mount)
    if grep -q " $root/" /proc/mounts; then
        echo "trixie: mounts left under $root:" >&2
        grep " $root/" /proc/mounts >&2
        rc=1
    elif [[ $keep -eq 0 && -d $root ]]; then
        rm -rf --one-file-system "$root"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "trixie: interrupted" >&2; exit 130' INT TERM

step_time() {    # step_time <name> <t0>
    timings+=("$1=$(($(date +%s) - $2))s")
}

in_root() {      # in_root <log name> <bash -c script>
    local log=$logs/$1.log
    shift
    if ! chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            DEBIAN_FRONTEND=noninteractive CI="${CI:-}" \
            bash -c "set -euo pipefail; $1" >"$log" 2>&1; then
        echo "trixie: last lines of $log:"
        tail -n 60 "$log" | sed 's/^/   | /'
        return 1
    fi
}

[[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || fail "debootstrap not installed (test/deps.sh installs it)"
[[ -x /usr/share/debootstrap/scripts/trixie || -e /usr/share/debootstrap/scripts/trixie ]] ||
    fail "this debootstrap does not know trixie"

# A root left by an interrupted run: unmount what is left, then start over.
if [[ -d $root ]]; then
    while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
        awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
    grep -q " $root/" /proc/mounts && fail "old mounts under $root"
    rm -rf --one-file-system "$root"
fi
mkdir -p "$root" "$logs"
rm -f "$logs"/*.log

# ------------------------------------------------------------ 1. debootstrap
stage=debootstrap
t0=$(date +%s)
echo "trixie: debootstrap trixie from $mirror into $root"
debootstrap --variant=minbase trixie "$root" "$mirror" >"$logs/debootstrap.log" 2>&1 ||
    { tail -n 30 "$logs/debootstrap.log"; fail "debootstrap (log: $logs/debootstrap.log)"; }
step_time debootstrap "$t0"

# ------------------------------------------------------------ 2. mounts
stage=mount
do_mount() {     # do_mount <target> <mount arguments...>
    local target=$1
    shift
    mkdir -p "$target"
    mount "$@" "$target" || fail "mount $* $target"
    mounted+=("$target")
}
do_mount "$root/proc" -t proc proc
do_mount "$root/sys" -t sysfs sysfs
# a fresh, empty /dev/shm (Open MPI's and UCX's shared-memory segments)
do_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
do_mount "$root/dev/pts" -t devpts -o newinstance,ptmxmode=0666 devpts
# The CUDA toolkit of this machine, read-only at the same path, when there
# is one: the component is then built with the same GPU kernels as on
# Debian 12 (configure finds /usr/local/cuda) and the device-buffer tests
# against the stand-in driver run the same way.
cuda_dir=
if [[ -e /usr/local/cuda/include/cuda.h ]]; then
    cuda_dir=$(readlink -f /usr/local/cuda)
    do_mount "$root$cuda_dir" --bind "$cuda_dir"
    mount -o remount,bind,ro "$root$cuda_dir" || fail "remount $root$cuda_dir read-only"
    [[ $cuda_dir == /usr/local/cuda ]] || ln -sfn "$cuda_dir" "$root/usr/local/cuda"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
hostname=$(hostname)
grep -q "$hostname" "$root/etc/hosts" 2>/dev/null || echo "127.0.1.1 $hostname" >>"$root/etc/hosts"

# ------------------------------------------------------------ 3. packages
stage=apt-get
t0=$(date +%s)
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb-src $mirror trixie main
EOF
in_root apt "apt-get update -q
apt-get install -y -q --no-install-recommends build-essential autoconf automake libtool \
    pkg-config libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev check iproute2 \
    dpkg-dev xz-utils ca-certificates
dpkg-query -W libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev check gcc" ||
    fail "apt-get install (log: $logs/apt.log)"
ompi_version=$(chroot "$root" dpkg-query -W -f='${Version}' libopenmpi-dev)
echo "trixie: packages installed: libopenmpi-dev $ompi_version," \
    "libucx-dev $(chroot "$root" dpkg-query -W -f='${Version}' libucx-dev)"
step_time apt-get "$t0"

# ------------------------------------------------------------ 4. build and test
stage=copy
mkdir -p "$root/xccl"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$top" ls-files -z --cached --others --exclude-standard |
        (cd "$top" && tar --null -T - -cf -) | tar -xf - -C "$root/xccl"
else
    tar -C "$top" --exclude=./build -cf - . | tar -xf - -C "$root/xccl"
fi
rm -rf "$root/xccl/build"

stage=ompi-source
t0=$(date +%s)
# The source of exactly the installed version, Debian's patches applied:
# the headers libopenmpi-dev lacks (configure --with-ompi-src).
in_root ompi-source "mkdir -p /xccl/build/ompi-src && cd /xccl/build/ompi-src
apt-get source -q openmpi=$ompi_version
ls -d openmpi-*/ | head -n 1 > ../ompi-src.dir" ||
    fail "apt-get source openmpi (log: $logs/ompi-source.log)"
ompi_src=/xccl/build/ompi-src/$(cat "$root/xccl/build/ompi-src.dir")
step_time ompi-source "$t0"

stage=build
t0=$(date +%s)
in_root build "cd /xccl && ./autogen.sh && cd build &&
../configure --enable-werror --with-ompi-src=$ompi_src && make -j$jobs" ||
    fail "configure/make (log: $logs/build.log)"
grep -E '^  (Open MPI|UCX|hwloc|Check tests|-Werror):' "$logs/build.log" | sed 's/^/trixie: /' || true
step_time build "$t0"

stage="make check"
t0=$(date +%s)
if ! in_root check "cd /xccl/build && make -j1 check"; then
    for f in test-suite.log test/mpi/mpi_tests.sh.log; do
        [[ -f $root/xccl/build/$f ]] && cp "$root/xccl/build/$f" "$logs/check-$(basename "$f")"
    done
    [[ -f $root/xccl/build/test/mpi/mpi_tests.sh.log ]] &&
        tail -n 80 "$root/xccl/build/test/mpi/mpi_tests.sh.log" | sed 's/^/   | /'
    fail "make check (logs: $logs/check*.log)"
fi
cp "$root/xccl/build/test/mpi/mpi_tests.sh.log" "$logs/check-mpi_tests.sh.log" 2>/dev/null || true
grep -E '^(PASS|FAIL|SKIP|XFAIL|ERROR):|^# (TOTAL|PASS|FAIL|SKIP|ERROR)' "$logs/check.log" |
    sed 's/^/trixie: /' || true
grep -hE '^(mpi-tests|stock-ops|gpu-tests):' "$root"/xccl/build/test/*/*.log \
    "$root"/xccl/build/test/*/*/*.log 2>/dev/null | sed 's/^/trixie: /' || true
step_time check "$t0"

stage="make install"
in_root install "cd /xccl/build && make install && ls -l \$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')/mca_coll_xccl.so" ||
    fail "make install (log: $logs/install.log)"

# ------------------------------------------------------------ 5. installed component
stage=ompi_info
in_root ompi_info "ompi_info --param coll xccl --level 9" || fail "ompi_info"
grep -q 'MCA coll: xccl (MCA v2.1.0, API v2.4.0' "$logs/ompi_info.log" ||
    fail "ompi_info does not list the xccl component with coll API 2.4.0"
params5=$(grep -oE 'parameter "coll_xccl_[a-z0-9_]+"' "$logs/ompi_info.log" | sort -u)
n5=$(grep -c . <<<"$params5")
echo "trixie: ompi_info --param coll xccl --level 9: component listed (API v2.4.0), $n5 parameters"
if [[ -e $top/build/component/mca_coll_xccl.so ]] && command -v ompi_info >/dev/null; then
    # this machine's Open MPI (4.1) with the component the suite built
    ompi_dir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
    v4=$(ompi_info --parsable | sed -n 's/^ompi:version:full://p')
    params4=$(OMPI_MCA_mca_base_component_path="$ompi_dir:$top/build/component" \
        ompi_info --param coll xccl --level 9 2>/dev/null |
        { grep -oE 'parameter "coll_xccl_[a-z0-9_]+"' || true; } | sort -u)
    [[ -n $params4 ]] || fail "ompi_info $v4 lists no xccl parameter for $top/build/component"
    if [[ $params4 != "$params5" ]]; then
        diff <(echo "$params4") <(echo "$params5") | sed 's/^/   | /'
        fail "the parameters differ from the Open MPI $v4 build's (< $v4, > 5.0)"
    fi
    echo "trixie: the same $n5 parameters as with Open MPI $v4"
fi

stage=xccl_bench
t0=$(date +%s)
for np in 2 4; do
    # the installed component, found by Open MPI itself; -x: sizes 8 B..1 MiB
    in_root "bench-np$np" "cd /tmp && timeout -k 10 300 mpirun --allow-run-as-root --oversubscribe \
        --mca mpi_yield_when_idle 1 -np $np /xccl/build/xccl_bench -b 8 -e 1M -f 8 -r 5" ||
        fail "xccl_bench at np $np (log: $logs/bench-np$np.log)"
    # exit status 1: xccl computed a wrong result; 4: xccl was not active
    grep -q '^# result: ' "$logs/bench-np$np.log" || fail "xccl_bench at np $np printed no result line"
    ! grep -q '^# result: FAIL' "$logs/bench-np$np.log" ||
        fail "xccl_bench at np $np: $(grep '^# result: ' "$logs/bench-np$np.log")"
done
echo "trixie: xccl_bench short sweep (8 B..1 MiB) at np 2 and 4 against the installed component: ok"
step_time bench "$t0"

stage=done
echo "trixie: times: ${timings[*]} total=$(($(date +%s) - t_start))s"
echo "trixie: PASSED (Debian 13, Open MPI $ompi_version: build, make check, make install, ompi_info, xccl_bench)"
