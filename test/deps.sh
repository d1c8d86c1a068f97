#!/bin/bash
# Debian 12 packages that xccl needs to build, test and run (run as root);
# debootstrap for the Debian roots (test/ompi5/run_trixie.sh,
# test/deb/deb_check.sh), debhelper and lintian for the Debian package.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev check iproute2
      debootstrap debhelper lintian)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
