#!/bin/sh
# Generate configure and Makefile.in (needs autoconf, automake, libtool, pkg-config).
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -fi
