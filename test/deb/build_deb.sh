#!/bin/bash
# Builds xccl's Debian package from this source tree, on Debian 12 (Open
# MPI 4.1) or Debian 13 (Open MPI 5.0), as root:
#
#   1. the build dependencies (debian/control, from the distribution) with
#      apt-get, where some are missing;
#   2. where the installed libopenmpi-dev lacks headers its own headers
#      include (Debian 13), the source of the installed Open MPI with
#      apt-get source (a deb-src line for the distribution's mirror is added
#      to /etc/apt/sources.list.d/xccl-deb-src.list when apt has none), or
#      the tree XCCL_OMPI_SRC names;
#   3. a copy of the source under OUTDIR, dpkg-buildpackage -b there.
#
# usage: test/deb/build_deb.sh [OUTDIR]     (default: <top>/build/deb)
# The packages land in OUTDIR (xccl_<version>_<arch>.deb and its debug
# symbols); the last line printed is the .deb's path.  The build says
# whether it has the CUDA device kernels ("xccl: CUDA device kernels: ...",
# also in /usr/share/doc/xccl/build-info of the package).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib/source_tree.sh
. "$top/test/lib/source_tree.sh"
out=${1:-$top/build/deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export DEBIAN_FRONTEND=noninteractive

say() { echo "build_deb: $*"; }

updated=0
apt_update() { [[ $updated -eq 1 ]] || apt-get update -q; updated=1; }

# ------------------------------------------------------------ 1. build dependencies
if ! command -v dpkg-checkbuilddeps >/dev/null || ! (cd "$top" && dpkg-checkbuilddeps) 2>/dev/null; then
    [[ $(id -u) -eq 0 ]] || { (cd "$top" && dpkg-checkbuilddeps) || true; say "missing build dependencies (run as root to install them)"; exit 1; }
    apt_update
    apt-get install -y -q --no-install-recommends build-essential dpkg-dev
    apt-get build-dep -y -q --no-install-recommends "$top"
fi

# ------------------------------------------------------------ 2. Open MPI's source, where needed
# The header opal_config.h names as the thread implementation (configure
# makes the same test).
missing=
for d in $(mpicc --showme:incdirs); do
    for f in "$d/opal_config.h" "$d/openmpi/opal_config.h"; do
        [[ -r $f ]] && missing=$(sed -n 's/^#define MCA_threads_mutex_base_include_HEADER "\(.*\)"$/\1/p' "$f")
    done
done
if [[ -n $missing ]]; then
    for d in $(mpicc --showme:incdirs); do
        [[ -r $d/$missing || -r $d/openmpi/$missing ]] && missing=
    done
fi
if [[ -n $missing && -z ${XCCL_OMPI_SRC:-} ]]; then
    ompi_version=$(dpkg-query -W -f='${Version}' libopenmpi-dev)
    say "libopenmpi-dev $ompi_version lacks $missing: getting the source of openmpi $ompi_version"
    mkdir -p "$out/ompi-src"
    src_dir=$(find "$out/ompi-src" -maxdepth 1 -type d -name 'openmpi-*' | head -n 1)
    if [[ -z $src_dir ]]; then
        if ! (cd "$out/ompi-src" && apt-get source -q "openmpi=$ompi_version"); then
            [[ $(id -u) -eq 0 ]] || { say "apt-get source openmpi failed (no deb-src line?)"; exit 1; }
            . /etc/os-release
            uri=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' | head -n 1)
            [[ -n $uri && -n ${VERSION_CODENAME:-} ]] || { say "cannot tell the distribution's mirror"; exit 1; }
            echo "deb-src $uri $VERSION_CODENAME main" >/etc/apt/sources.list.d/xccl-deb-src.list
            say "added /etc/apt/sources.list.d/xccl-deb-src.list: deb-src $uri $VERSION_CODENAME main"
            updated=0
            apt_update
            (cd "$out/ompi-src" && apt-get source -q "openmpi=$ompi_version")
        fi
        src_dir=$(find "$out/ompi-src" -maxdepth 1 -type d -name 'openmpi-*' | head -n 1)
    fi
    export XCCL_OMPI_SRC=$src_dir
fi
[[ -n ${XCCL_OMPI_SRC:-} ]] && say "Open MPI source for the missing headers: $XCCL_OMPI_SRC"

# ------------------------------------------------------------ 3. the package
version=$(cd "$top" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
src=$out/xccl-$version
rm -rf "$src"
mkdir -p "$src"
copy_source_tree "$top" "$src"
rm -f "$out/xccl_${version}_$arch.deb" "$out/xccl-dbgsym_${version}_$arch.deb"
(cd "$src" && dpkg-buildpackage -b -us -uc -J"$(nproc)")
rm -rf "$src"
deb=$out/xccl_${version}_$arch.deb
[[ -f $deb ]] || { say "no $deb"; exit 1; }
say "built $(du -k "$deb" | cut -f1) KiB:"
echo "$deb"
