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
#   6. the Debian package: test/deb/deb_check.sh build in the root (the
#      .deb, lintian, installed_check), then deb_check.sh install into a
#      copy of the root taken right after debootstrap (nothing installed
#      into it: no build tools), with the Debian 12 package of
#      build/deb/bookworm, when there, as the one apt-get must refuse;
#   7. unmount everything and delete the roots, also on failure or signal
#      (test/lib/chroot.sh).
#
# usage: test/ompi5/run_trixie.sh [--keep]   (--keep: leave the root for
#        debugging; it is still unmounted)
# Environment: XCCL_TRIXIE_MIRROR (default http://deb.debian.org/debian),
#   XCCL_TRIXIE_DIR (default <top>/build/trixie).
# make check runs in full; the multi-host test (network namespaces) reports
# SKIP inside the chroot ('ip netns exec' needs / to be a mount point) and
# is listed as skipped in the verdict; it runs in the Debian 12 suite.
# Prints "trixie: PASSED ..." or "trixie: FAILED at <stage> ..." and exits
# 0 / 1.  Logs: $XCCL_TRIXIE_DIR/logs/ and $XCCL_TRIXIE_DIR/deb/logs/ (kept).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib/chroot.sh
. "$top/test/lib/chroot.sh"
# shellcheck source=../lib/source_tree.sh
. "$top/test/lib/source_tree.sh"
[[ ${1:-} == --keep ]] && chroot_keep=1
mirror=${XCCL_TRIXIE_MIRROR:-http://deb.debian.org/debian}
work=${XCCL_TRIXIE_DIR:-$top/build/trixie}
root=$work/root
fresh=$work/fresh      # the copy for the package's install test
logs=$work/logs
jobs=2

stage=setup
t_start=$(date +%s)
declare -a timings=()

fail() {
    echo "trixie: FAILED at $stage: $*"
    exit 1
}

step_time() {    # step_time <name> <t0>
    timings+=("$1=$(($(date +%s) - $2))s")
}

in_root() {      # in_root <log name> <bash -c script>
    chroot_run "$root" "$logs/$1.log" "$2"
}

[[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || fail "debootstrap not installed (test/deps.sh installs it)"

chroot_init trixie
# (a root left by an interrupted run is unmounted and deleted first)
chroot_new "$root" || fail "cannot make $root"
chroot_new "$fresh" || fail "cannot make $fresh"
mkdir -p "$logs"
rm -f "$logs"/*.log

# ------------------------------------------------------------ 1. debootstrap
stage=debootstrap
t0=$(date +%s)
echo "trixie: debootstrap trixie from $mirror into $root"
chroot_debootstrap trixie "$root" "$mirror" "$logs/debootstrap.log" || fail "debootstrap"
# The root as debootstrap left it, for the package's install test (step 6).
cp -a "$root/." "$fresh/"
step_time debootstrap "$t0"

# ------------------------------------------------------------ 2. mounts
stage=mount
chroot_mount "$root" || fail "mounts"
# The CUDA toolkit of this machine, read-only at the same path, when there
# is one: the component is then built with the same GPU kernels as on
# Debian 12 (configure finds /usr/local/cuda) and the device-buffer tests
# against the stand-in driver run the same way.
cuda_dir=
if [[ -e /usr/local/cuda/include/cuda.h ]]; then
    cuda_dir=$(readlink -f /usr/local/cuda)
    chroot_bind_ro "$cuda_dir" "$root" || fail "mount $cuda_dir"
    [[ $cuda_dir == /usr/local/cuda ]] || ln -sfn "$cuda_dir" "$root/usr/local/cuda"
fi

# ------------------------------------------------------------ 3. packages
stage=apt-get
t0=$(date +%s)
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb-src $mirror trixie main
EOF
# debhelper and lintian: the Debian package (step 6)
in_root apt "apt-get update -q
apt-get install -y -q --no-install-recommends build-essential autoconf automake libtool \
    pkg-config libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev check iproute2 \
    dpkg-dev xz-utils ca-certificates debhelper lintian
dpkg-query -W libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev check gcc" ||
    fail "apt-get install (log: $logs/apt.log)"
ompi_version=$(chroot "$root" dpkg-query -W -f='${Version}' libopenmpi-dev)
echo "trixie: packages installed: libopenmpi-dev $ompi_version," \
    "libucx-dev $(chroot "$root" dpkg-query -W -f='${Version}' libucx-dev)"
step_time apt-get "$t0"

# ------------------------------------------------------------ 4. build and test
stage=copy
mkdir -p "$root/xccl"
copy_source_tree "$top" "$root/xccl"
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
    # The installed component, in Open MPI's own directory.  Named
    # explicitly: Debian 13's mpirun (PRRTE) sets
    # OMPI_MCA_mca_base_component_path to PMIx's component directory in
    # every rank, so without it no rank looks in Open MPI's (ompi_info,
    # not started by mpirun, does).  Sizes 8 B..1 MiB.
    in_root "bench-np$np" "cd /tmp && timeout -k 10 300 mpirun --allow-run-as-root --oversubscribe \
        --mca mpi_yield_when_idle 1 \
        --mca mca_base_component_path \$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p') \
        -np $np /xccl/build/xccl_bench -b 8 -e 1M -f 8 -r 5" ||
        fail "xccl_bench at np $np (log: $logs/bench-np$np.log)"
    ! grep -q 'xccl not loaded' "$logs/bench-np$np.log" ||
        fail "xccl_bench at np $np: the installed component was not loaded"
    # exit status 1: xccl computed a wrong result; 4: xccl was not active
    grep -q '^# result: ' "$logs/bench-np$np.log" || fail "xccl_bench at np $np printed no result line"
    ! grep -q '^# result: FAIL' "$logs/bench-np$np.log" ||
        fail "xccl_bench at np $np: $(grep '^# result: ' "$logs/bench-np$np.log")"
done
echo "trixie: xccl_bench short sweep (8 B..1 MiB) at np 2 and 4 against the installed component: ok"
step_time bench "$t0"

# ------------------------------------------------------------ 6. the Debian package
stage="deb build"
t0=$(date +%s)
in_root deb-build "cd /xccl && XCCL_OMPI_SRC=$ompi_src test/deb/deb_check.sh build /xccl/build/deb" ||
    fail "the Debian package (log: $logs/deb-build.log, $root/xccl/build/deb/logs/)"
grep '^deb: ' "$logs/deb-build.log" | sed 's/^/trixie: /' || true
rm -rf "$work/deb"
mkdir -p "$work/deb"
cp -a "$root/xccl/build/deb/logs" "$root"/xccl/build/deb/xccl_*.deb "$root/xccl/build/deb/installed_check" "$work/deb/"
step_time deb-build "$t0"

stage="deb install"
t0=$(date +%s)
# the package built against Open MPI 4.1.4 must not install beside 5.0.7
foreign=$(ls "$top"/build/deb/bookworm/xccl_*.deb 2>/dev/null | head -n 1 || true)
# the build root goes first: its mounts and space are not needed any more
chroot_release "$root" || fail "cannot release $root"
if ! XCCL_DEB_FOREIGN=$foreign XCCL_DEB_MIRROR=$mirror chroot_keep=$chroot_keep \
        "$top/test/deb/deb_check.sh" install trixie "$work/deb" "$fresh" | sed 's/^/trixie: /'; then
    fail "the Debian package's install test (logs: $work/deb/logs/)"
fi
step_time deb-install "$t0"

stage=done
echo "trixie: times: ${timings[*]} total=$(($(date +%s) - t_start))s"
echo "trixie: PASSED (Debian 13, Open MPI $ompi_version: build, make check, make install, ompi_info, xccl_bench, Debian package)"
