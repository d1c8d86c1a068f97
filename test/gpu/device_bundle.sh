#!/usr/bin/env bash
# Carries Debian 12's Open MPI (runtime: mpirun, libmpi, its components,
# UCX, hwloc, PMIx, libevent, libfabric, verbs, ...) to a machine that has
# none and no package registry (the GPU machine runs a copy of this working
# tree): run it HERE, on Debian 12 with apt; it
#   1. computes the Depends closure of openmpi-bin + libopenmpi3 (first
#      alternative of each "a | b"), minus what any Debian/Ubuntu base has
#      (libc6, libgcc-s1, libstdc++6, zlib1g, ...) and what a one-node
#      mpirun does not need (openssh-client, hwloc's X11/OpenCL plugins),
#   2. downloads the .debs with `apt-get download` into <dir>/debs,
#   3. unpacks each with `dpkg -x` into <dir>/ompi-prefix,
#   4. writes <dir>/env.sh, which makes mpirun run from that prefix
#      (PATH, LD_LIBRARY_PATH, OPAL_PREFIX and the other OPAL_*DIR, the
#      component path), and
#   5. checks it: `mpirun -np 2 hostname` with only env.sh's PATH/libraries
#      (the prefix's mpirun, not /usr/bin's).
#
# usage: device_bundle.sh [--dev] [<dir>]
#   <dir>  default: test/gpu/.device (git-ignored, inside the working tree,
#          so it travels to the GPU machine)
#   --dev  also libopenmpi-dev (mpicc, headers) - bigger
#
# On the GPU machine:   . test/gpu/.device/env.sh && mpirun -np 2 hostname
# (env.sh finds the prefix relative to itself, so the tree may live anywhere.)
# Needs glibc >= 2.36 there (Debian 12's libraries); env.sh checks.
set -euo pipefail

dev=0
if [[ ${1:-} == --dev ]]; then dev=1; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/.device}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
prefix=$dir/ompi-prefix
debs=$dir/debs

# libsubunit0: the Check unit tests that run there (test_gpu_classify, built
# against Debian's static libcheck) need it
roots=(openmpi-bin libopenmpi3 openmpi-common libsubunit0)
[[ $dev -eq 0 ]] || roots+=(libopenmpi-dev)

# On every Debian/Ubuntu base system, or not needed by a one-node mpirun.
skip_re='^(libc6|libc-bin|libgcc-s1|libstdc\+\+6|gcc-[0-9]+-base|zlib1g|libzstd1|liblzma5|libbz2-1\.0|libcrypt1|libselinux1|libpcre2-8-0|libpam.*|libaudit.*|libcap-ng0|libcap2|libsemanage.*|libsepol2|libmd0|libbsd0|libtinfo6|libreadline8|readline-common|libudev1|libuuid1|libssl3|libcom-err2|libgssapi-krb5-2|libk5crypto3|libkeyutils1|libkrb5-3|libkrb5support0|libedit2|libcbor0\.8|libfido2-1|openssh-client|debconf|cdebconf|dpkg|tar|adduser|passwd|install-info|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1|perl-base|libhwloc-plugins|libxnvctrl0|ocl-icd-libopencl1|libx11-.*|libxau6|libxcb1|libxdmcp6|libxext6|libgfortran5|libquadmath0|gfortran.*|libcaf-openmpi-3|libcoarrays-.*|libjs-.*|openmpi-doc)$'
[[ $dev -eq 0 ]] || skip_re=${skip_re%)\$}'|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt-dev|libnsl-dev|libtirpc-dev|gcc.*|cpp.*|binutils.*|libgcc-.*-dev|libstdc\+\+-.*-dev)$'

# The Depends/PreDepends closure, first alternative only.
declare -A seen=()
queue=("${roots[@]}")
while [[ ${#queue[@]} -gt 0 ]]; do
    pkg=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -z ${seen[$pkg]:-} ]] || continue
    seen[$pkg]=1
    # "  Depends: x" lines; a "|Depends:" line is an alternative to the next
    deps=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "$pkg" 2>/dev/null |
        awk '/^  \|?(Pre)?Depends: / { alt = ($1 ~ /^\|/); name = $2
                 if (!inalt && name !~ /^</) print name; inalt = alt }')
    for d in $deps; do
        d=${d%%:*}
        [[ $d =~ $skip_re ]] && continue
        [[ -n ${seen[$d]:-} ]] || queue+=("$d")
    done
done
pkgs=$(printf '%s\n' "${!seen[@]}" | sort)
echo "bundle: $(wc -w <<<"$pkgs") packages: $(tr '\n' ' ' <<<"$pkgs")"

mkdir -p "$debs"
(cd "$debs" && for p in $pkgs; do
    ls "${p}"_*.deb >/dev/null 2>&1 || apt-get -o APT::Sandbox::User=root download "$p" >/dev/null
done)
rm -rf "$prefix"
mkdir -p "$prefix"
for f in "$debs"/*.deb; do
    dpkg -x "$f" "$prefix"
done
# The alternatives links (/usr/bin/mpirun -> /etc/alternatives/...) are
# made by postinst scripts, which dpkg -x does not run.
for pair in mpirun:orterun mpiexec:orterun; do
    l=${pair%%:*} t=${pair#*:}
    [[ -e $prefix/usr/bin/$t && ! -e $prefix/usr/bin/$l ]] && ln -sf "$t" "$prefix/usr/bin/$l"
done
if [[ $dev -eq 1 && -e $prefix/usr/bin/mpicc.openmpi && ! -e $prefix/usr/bin/mpicc ]]; then
    ln -sf mpicc.openmpi "$prefix/usr/bin/mpicc"
fi
# Absolute symlinks inside the prefix would point back at /: make them relative.
find "$prefix" -type l | while read -r l; do
    t=$(readlink "$l")
    if [[ $t == /* && -e $prefix$t ]]; then
        ln -sfn "$(realpath --relative-to="$(dirname "$l")" "$prefix$t")" "$l"
    fi
done

cat >"$dir/env.sh" <<'ENV'
# Source me: Open MPI from the unpacked Debian 12 packages next to me.
_ompi_dir=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
_p=$_ompi_dir/ompi-prefix
_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
case $_glibc in
    2.3[6-9]*|2.[4-9]*) ;;
    *) echo "env.sh: glibc $_glibc here; the bundled Open MPI needs >= 2.36" >&2 ;;
esac
_lib=$_p/usr/lib/x86_64-linux-gnu
export PATH=$_p/usr/bin${PATH:+:$PATH}
export LD_LIBRARY_PATH=$_lib/openmpi/lib:$_lib:$_lib/libfabric:$_lib/ucx:$_p/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Debian's Open MPI has prefix /usr and sysconfdir /etc/openmpi compiled in.
export OPAL_PREFIX=$_p/usr
export OPAL_EXEC_PREFIX=$_p/usr
export OPAL_BINDIR=$_p/usr/bin
export OPAL_LIBDIR=$_lib/openmpi/lib
export OPAL_INCLUDEDIR=$_lib/openmpi/include
export OPAL_DATAROOTDIR=$_p/usr/share
export OPAL_DATADIR=$_p/usr/share
export OPAL_PKGDATADIR=$_p/usr/share/openmpi
export OPAL_PKGLIBDIR=$_lib/openmpi/lib/openmpi3
export OPAL_SYSCONFDIR=$_p/etc/openmpi
export OMPI_COMPONENT_DIR=$_lib/openmpi/lib/openmpi3
export OMPI_MCA_mca_base_component_path=$OMPI_COMPONENT_DIR
# UCX's own modules (transports) and hwloc/PMIx plugins live in the prefix too
export UCX_MODULE_DIR=$_lib/ucx
export PMIX_MCA_mca_base_component_path=$_lib/pmix2/lib/pmix
export PMIX_INSTALL_PREFIX=$_lib/pmix2
export HWLOC_PLUGINS_PATH=$_lib/hwloc
unset _p _lib _glibc _ompi_dir
ENV

size=$(du -sm "$prefix" | cut -f1)
dsize=$(du -sm "$debs" | cut -f1)
echo "prefix: $prefix ($size MiB unpacked, $dsize MiB of .debs)"

# Check: the prefix's mpirun, with /usr/bin/mpirun out of the way.
echo "check: mpirun -np 2 hostname from the prefix"
(
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    unset LD_LIBRARY_PATH
    # shellcheck disable=SC1091
    . "$dir/env.sh"
    [[ $(command -v mpirun) == "$prefix"/* ]] || { echo "mpirun is $(command -v mpirun)" >&2; exit 1; }
    echo "mpirun: $(command -v mpirun)"
    mpirun --allow-run-as-root --oversubscribe -np 2 hostname
    ldd "$prefix/usr/bin/orterun" | grep -E 'libopen-(rte|pal)' | sed 's/^\s*/ldd orterun: /'
    ompi_info --path pkgdatadir --path sysconfdir --path pkglibdir 2>/dev/null | sed 's/^ */ompi_info: /'
    # As root with unshare: hide the system's Open MPI (components, help
    # files, config, mpirun) to prove nothing comes from /usr.
    if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null; then
        empty=$(mktemp -d)
        unshare -m bash -c '
            for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/share/openmpi /etc/openmpi; do
                [[ -d $d ]] && mount --bind "$1" "$d"
            done
            echo "system Open MPI hidden: $(ls /usr/lib/x86_64-linux-gnu/openmpi | wc -l) entries left"
            mpirun --allow-run-as-root --oversubscribe -np 2 hostname' _ "$empty"
        rmdir "$empty"
    fi
)
echo "ok: . $dir/env.sh"
