#!/bin/bash
# xccl's Debian package as users get it: built, linted, installed with
# apt-get into a fresh root of the distribution that has no build tools,
# used there without any --mca coll or component path, purged.
#
# usage:
#   test/deb/deb_check.sh SUITE            bookworm on Debian 12 (what
#       test/run_all.sh runs): build here into build/deb/SUITE, then install
#       into a fresh SUITE root (debootstrap)
#   test/deb/deb_check.sh build DEBDIR     on a machine with the build
#       tools (test/ompi5/run_trixie.sh runs it in its Debian 13 root):
#       test/deb/build_deb.sh DEBDIR, lintian on the .deb (no error; the
#       warnings are printed), and installed_check.c built with mpicc
#   test/deb/deb_check.sh install SUITE DEBDIR [ROOT]   as root: DEBDIR's
#       .deb into ROOT, a root of SUITE made with debootstrap that nothing
#       was installed into (run_trixie.sh's copy; it is deleted afterwards),
#       or into a new one made here
#
# The install step, in the fresh root:
#   1. apt-get satisfy the package's Depends (with Recommends, as apt
#      install does), a list of every file of the root, then apt-get install
#      of the .deb itself; no compiler, linker, make or dpkg-buildpackage
#      there (openmpi-bin's mpicc is, a wrapper without a compiler);
#   2. the files: the component in `ompi_info --path pkglibdir`, the tools
#      in /usr/bin, their manual pages, the documentation, and on Open MPI 5
#      the override files of Open MPI (a conffile) and of PMIx (debian/rules
#      says why);
#   3. ompi_info lists the xccl component;
#   4. installed_check at np 3 under plain mpirun with coll_xccl_verbose 1:
#      right results on every rank, and on every rank xccl's verbose line
#      (algo=, never fallback=) for every allreduce, bcast and alltoall call,
#      no fallback or error in xccl's summaries, no warning about the
#      override file or PMIx's "bad prefix";
#      xccl_bench at np 2 (its exit status 4 says xccl was not active),
#      xccl_info, xccl_simulate;
#   5. the line "coll = ^xccl" in /etc/openmpi/openmpi-mca-params.conf (the
#      off switch README documents): installed_check at np 3 gets right
#      results without a line of xccl's; the file is put back;
#   6. apt-get remove --purge xccl: the list of every file of the root is
#      the one of step 1 again, and dpkg knows no xccl; but for what the
#      runs of steps 3-5 left in root's home, which is the user's, not the
#      package's (purge leaves any program's ~/.cache): the level's trial
#      picks, /root/.cache/xccl/picks-<host> (coll_xccl_picks_file; where
#      the runs timed trials), which must hold picks;
#   7. with XCCL_DEB_FOREIGN=FILE (a .deb built for another Open MPI):
#      apt-get refuses to install it (simulated).
# Also: the package's Depends bound Open MPI's library package to the
# upstream version it was built against (>= V, << next~).
#
# Environment: XCCL_DEB_MIRROR (default http://deb.debian.org/debian),
#   XCCL_DEB_FOREIGN (above), chroot_keep=1 (leave the root for debugging).
# Prints "deb: PASSED ..." or "deb: FAILED at <stage> ..." and exits 0 / 1.
# Logs: DEBDIR/logs/ (kept).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${XCCL_DEB_MIRROR:-http://deb.debian.org/debian}
stage=setup

fail() {
    echo "deb: FAILED at $stage: $*"
    exit 1
}

# ------------------------------------------------------------ build
deb_build() {
    local debdir=$1 log deb lint
    mkdir -p "$debdir/logs"
    debdir=$(cd "$debdir" && pwd)
    log=$debdir/logs/build.log
    stage=build
    local t0=$(date +%s)
    if ! "$top/test/deb/build_deb.sh" "$debdir" >"$log" 2>&1; then
        tail -n 40 "$log" | sed 's/^/   | /'
        fail "test/deb/build_deb.sh (log: $log)"
    fi
    deb=$(tail -n 1 "$log")
    [[ -f $deb ]] || fail "build_deb.sh printed no package"
    grep -E '^xccl: CUDA device kernels' "$log" | sed 's/^/deb: /' || true
    echo "deb: built $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB, in $(($(date +%s) - t0)) s"

    stage=lintian
    command -v lintian >/dev/null || fail "lintian is not installed"
    lint=$debdir/logs/lintian.log
    # lintian's exit status is 0 with warnings only, 1 with an error
    lintian --info --pedantic "$deb" >"$lint" 2>&1 || true
    grep -E '^[EWIPX]: ' "$lint" | sed 's/^/deb: lintian: /' || true
    ! grep -q '^E: ' "$lint" || fail "lintian reports errors (log: $lint)"
    echo "deb: lintian $(lintian --version | awk '{print $2}'): no error"

    stage="installed_check (mpicc)"
    mpicc -O2 -o "$debdir/installed_check" "$top/test/deb/installed_check.c" ||
        fail "mpicc test/deb/installed_check.c"
}

# ------------------------------------------------------------ install
in_root() {     # in_root <log name> <script>
    chroot_run "$root" "$logs/$1.log" "$2"
}

deb_install() {
    local suite=$1 debdir=$2 given_root=${3:-} deb pkgdeps t0 t_all
    debdir=$(cd "$debdir" && pwd)
    logs=$debdir/logs
    mkdir -p "$logs"
    deb=$(ls "$debdir"/xccl_*.deb 2>/dev/null | head -n 1)
    [[ -f $deb ]] || fail "no xccl_*.deb in $debdir"
    [[ -x $debdir/installed_check ]] || fail "no $debdir/installed_check (deb_check.sh build makes it)"
    [[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, chroot, mount)"
    t_all=$(date +%s)

    # shellcheck source=../lib/chroot.sh
    . "$top/test/lib/chroot.sh"
    chroot_init deb
    stage=root
    t0=$(date +%s)
    if [[ -n $given_root ]]; then
        root=$given_root
        [[ -x $root/usr/bin/apt-get ]] || fail "$root is not a Debian root"
        chroot_adopt "$root"
        echo "deb: fresh $suite root: $root"
    else
        command -v debootstrap >/dev/null || fail "debootstrap is not installed (test/deps.sh installs it)"
        root=$debdir/root
        chroot_new "$root" || fail "cannot make $root"
        echo "deb: debootstrap $suite from $mirror into $root"
        chroot_debootstrap "$suite" "$root" "$mirror" "$logs/debootstrap.log" || fail debootstrap
    fi
    chroot_mount "$root" || fail mount
    local t_root=$(($(date +%s) - t0))

    # Static: Depends bounds the Open MPI library to one upstream version.
    stage=depends
    pkgdeps=$(dpkg-deb -f "$deb" Depends)
    echo "deb: Depends: $pkgdeps"
    local lib lo hi
    read -r lib lo hi < <(tr ',' '\n' <<<"$pkgdeps" | awk '
        $1 ~ /^libopenmpi/ && $2 == "(>=" { lib = $1; lo = $3 }
        $1 ~ /^libopenmpi/ && $2 == "(<<" { hi = $3 }
        END { gsub(/\)/, "", lo); gsub(/\)/, "", hi); print lib, lo, hi }')
    [[ -n $lib && -n $lo && -n $hi && $hi == *~ ]] || fail "Depends has no libopenmpi (>= V), (<< W~) pair"
    # the next upstream version with any Debian revision is refused
    dpkg --compare-versions "${hi%\~}-1" ge "$hi" || fail "the bound $hi lets ${hi%\~}-1 in"
    dpkg --compare-versions "$lo-1" lt "$hi" || fail "the bounds $lo, $hi exclude $lo-1"

    stage="apt-get install"
    t0=$(date +%s)
    rm -rf "$root/tmp/xccl-check"
    mkdir -p "$root/tmp/xccl-check"
    cp "$deb" "$debdir/installed_check" "$root/tmp/xccl-check/"
    local debname snapshot_cmd
    debname=/tmp/xccl-check/$(basename "$deb")
    # every path of the root but the kernel's, the logs, apt's and dpkg's
    # own state and /tmp
    snapshot_cmd="find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
        -o -path /var/log -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg \\) -prune \
        -o -print | LC_ALL=C sort"
    in_root apt "apt-get update -q
apt-get satisfy -y -q '$pkgdeps'
$snapshot_cmd > /tmp/xccl-check/before.list
apt-get install -y -q $debname
dpkg-query -W xccl $lib openmpi-bin" || fail "apt-get (log: $logs/apt.log)"
    echo "deb: installed with apt-get: $(grep -E '^(xccl|libopenmpi|openmpi-bin)' "$logs/apt.log" | tr '\t' ' ' | paste -sd, - | sed 's/,/, /g')"
    in_root no-tools "for t in cc gcc c++ g++ ld make dpkg-buildpackage; do
    if command -v \$t; then echo \"build tool \$t in the root\"; exit 1; fi
done" || fail "the root has build tools (log: $logs/no-tools.log)"
    local t_apt=$(($(date +%s) - t0))

    stage=files
    t0=$(date +%s)
    in_root files "pkglibdir=\$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
ls -l \$pkglibdir/mca_coll_xccl.so
for t in xccl_info xccl_bench xccl_simulate xccl_calibrate; do
    ls -l /usr/bin/\$t /usr/share/man/man1/\$t.1.gz
done
ls /usr/share/doc/xccl/README.gz /usr/share/doc/xccl/copyright /usr/share/doc/xccl/docs/parameters.md.gz
cat /usr/share/doc/xccl/build-info
if [[ \$(ompi_info --parsable | sed -n 's/^ompi:version:full://p') == 5.* ]]; then
    grep -q '^mca_base_component_path = SYS_DEFAULT:USER_DEFAULT' /etc/openmpi/openmpi-mca-params-override.conf
    dpkg-query -W -f='\${Conffiles}' xccl | grep -q /etc/openmpi/openmpi-mca-params-override.conf
    grep -q '^mca_base_suppress_override_warning = 1' \$(dpkg-query -L xccl | grep /pmix-mca-params-override.conf)
fi" || fail "the package's files (log: $logs/files.log)"

    stage=ompi_info
    in_root ompi_info "ompi_info" || fail "ompi_info (log: $logs/ompi_info.log)"
    grep -E 'MCA coll: xccl ' "$logs/ompi_info.log" | sed 's/^ */deb: ompi_info: /' ||
        fail "ompi_info does not list the xccl component"

    stage="installed_check np 3"
    # No --mca coll and no component path: what a user types.
    local mpirun="cd /tmp && timeout -k 10 180 mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1"
    in_root check-np3 "$mpirun --mca coll_xccl_verbose 1 -np 3 /tmp/xccl-check/installed_check" ||
        fail "installed_check at np 3 (log: $logs/check-np3.log)"
    local r c want n bad=
    for r in 0 1 2; do
        grep -q "^installed_check: rank $r: 18 calls ok" "$logs/check-np3.log" || bad+=" rank $r: no 'ok' line;"
        for c in allreduce:6 bcast:9 alltoall:3; do
            want=${c#*:}
            c=${c%:*}
            n=$(grep -cE "^xccl: $c comm=0 rank=$r .*algo=" "$logs/check-np3.log" || true)
            [[ $n -eq $want ]] || bad+=" rank $r: $n of $want $c calls with algo=;"
            ! grep -qE "^xccl: $c comm=0 rank=$r .*fallback=" "$logs/check-np3.log" ||
                bad+=" rank $r: $c fallback;"
        done
    done
    ! grep -E '^xccl: summary .*(fallback|errors)=[1-9]' "$logs/check-np3.log" || bad+=" fallbacks or errors in the summary;"
    ! grep -E 'override variable file|bad prefix' "$logs/check-np3.log" || bad+=" warnings;"
    [[ -z $bad ]] || fail "installed_check at np 3:$bad (log: $logs/check-np3.log)"
    echo "deb: installed_check np 3: results right, every call xccl's on every rank: $(
        grep -oE '^xccl: (allreduce|bcast|alltoall) comm=0 rank=0 .*algo=[a-z_0-9]+' "$logs/check-np3.log" |
        sed -E 's/^xccl: ([a-z]+) .*algo=/\1=/' | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')"

    stage="xccl_bench np 2"
    in_root bench-np2 "$mpirun -np 2 xccl_bench -c allreduce,bcast,alltoall -b 64K -e 64K -r 1 -q" ||
        fail "xccl_bench at np 2 (exit 4: xccl was not active; log: $logs/bench-np2.log)"
    grep -q '^# result: ' "$logs/bench-np2.log" || fail "xccl_bench printed no result line"
    in_root tools "xccl_info > /dev/null && xccl_simulate -c allreduce -n 64 -s 1M | tail -n 1" ||
        fail "xccl_info / xccl_simulate (log: $logs/tools.log)"
    echo "deb: xccl_bench np 2 (allreduce, bcast, alltoall at 64 KiB): $(grep '^# result: ' "$logs/bench-np2.log" | sed 's/^# result: //'); xccl_info, xccl_simulate ran"

    stage="off switch"
    in_root off "conf=/etc/openmpi/openmpi-mca-params.conf
cp \$conf /tmp/xccl-check/params.conf
# a line of its own: Debian's file ends without a newline
printf '\\ncoll = ^xccl\\n' >> \$conf
$mpirun --mca coll_xccl_verbose 1 -np 3 /tmp/xccl-check/installed_check
cp /tmp/xccl-check/params.conf \$conf" || fail "with coll = ^xccl (log: $logs/off.log)"
    ! grep -q '^xccl: ' "$logs/off.log" || fail "xccl still ran with coll = ^xccl (log: $logs/off.log)"
    [[ $(grep -c '^installed_check: rank [0-2]: 18 calls ok' "$logs/off.log") -eq 3 ]] ||
        fail "installed_check with coll = ^xccl (log: $logs/off.log)"
    echo "deb: coll = ^xccl in openmpi-mca-params.conf: xccl off (installed_check np 3 right, no line of xccl's)"
    local t_use=$(($(date +%s) - t0))

    stage=purge
    t0=$(date +%s)
    in_root purge "apt-get remove --purge -y -q xccl
$snapshot_cmd > /tmp/xccl-check/after.list
picks=\$(ls /root/.cache/xccl/picks-* 2>/dev/null || true)
if [ -n \"\$picks\" ] && ! grep -qv '^#' \$picks; then
    echo \"no trial picks in \$picks (coll_xccl_picks_file)\"; exit 1
fi
users='^/root/[.]cache(/xccl(/picks-[^/]*)?)?\$'
if ! diff <(grep -Ev \"\$users\" /tmp/xccl-check/before.list) <(grep -Ev \"\$users\" /tmp/xccl-check/after.list); then
    echo 'the root differs from before the install'; exit 1
fi
echo \"left in root's home, the user's: \${picks:-nothing}\"
if dpkg-query -W -f='\${db:Status-Abbrev}\n' xccl 2>/dev/null | grep -q .; then
    echo \"dpkg still knows xccl: \$(dpkg-query -W -f='\${db:Status-Abbrev}' xccl)\"; exit 1
fi
if ls /var/lib/dpkg/info/xccl.* 2>/dev/null; then echo 'dpkg info files left'; exit 1; fi" ||
        fail "apt-get remove --purge (log: $logs/purge.log)"
    echo "deb: apt-get remove --purge xccl: no file left ($(wc -l <"$root/tmp/xccl-check/before.list") paths as before;" \
        "$(sed -n "s/^left in root's home, the user's: //p" "$logs/purge.log") stays, the user's)"

    if [[ -n ${XCCL_DEB_FOREIGN:-} ]]; then
        stage="foreign package"
        [[ -f $XCCL_DEB_FOREIGN ]] || fail "no $XCCL_DEB_FOREIGN"
        cp "$XCCL_DEB_FOREIGN" "$root/tmp/xccl-check/foreign.deb"
        if chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
                apt-get install -s -q /tmp/xccl-check/foreign.deb >"$logs/foreign.log" 2>&1; then
            fail "apt-get would install $(basename "$XCCL_DEB_FOREIGN") built for Depends: $(dpkg-deb -f "$XCCL_DEB_FOREIGN" Depends)"
        fi
        echo "deb: apt-get refuses the package built for $(dpkg-deb -f "$XCCL_DEB_FOREIGN" Depends |
            grep -oE 'libopenmpi[^,]*\(<<[^)]*\)'): $(grep -m1 -E 'Depends:' "$logs/foreign.log" | sed 's/^ *//')"
    fi
    local t_purge=$(($(date +%s) - t0))
    stage=done
    echo "deb: times: root=${t_root}s apt=${t_apt}s use=${t_use}s purge=${t_purge}s total=$(($(date +%s) - t_all))s"
    echo "deb: PASSED ($suite: $(basename "$deb") installed with apt-get into a fresh root, used by default, purged)"
}

case ${1:-} in
build)
    [[ $# -eq 2 ]] || fail "usage: deb_check.sh build DEBDIR"
    deb_build "$2"
    ;;
install)
    [[ $# -ge 3 && $# -le 4 ]] || fail "usage: deb_check.sh install SUITE DEBDIR [ROOT]"
    deb_install "$2" "$3" "${4:-}"
    ;;
bookworm | trixie)
    # shellcheck source=/dev/null
    [[ $(. /etc/os-release && echo "${VERSION_CODENAME:-}") == "$1" ]] ||
        fail "builds for this machine's distribution only (Debian 13: test/ompi5/run_trixie.sh)"
    debdir=$top/build/deb/$1
    deb_build "$debdir"
    deb_install "$1" "$debdir"
    ;;
*)
    echo "usage: deb_check.sh SUITE | build DEBDIR | install SUITE DEBDIR [ROOT]" >&2
    exit 2
    ;;
esac
