#!/bin/bash
# No fused multiply-add in the host reduction kernels (base/reduce_kernels.c).
# test_kernels runs only the instruction-set variants this CPU has; this
# looks at the machine code of all of them, so that an FMA in, say, the
# x86-64-v4 variant fails here too on a CPU without AVX-512.  A fused
# multiply-add rounds once where the reference (and the GPU kernels, built
# with -fmad=false) round twice: the ranks of a job on different CPUs would
# end with different bits.  Exit 77 (skip) without objdump or off x86-64.
set -uo pipefail
b=${XCCL_BUILDDIR:?}
lib=$b/.libs/libxccl_base.a
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
[[ $(uname -m) == x86_64 ]] || { echo "SKIP: not x86-64"; exit 77; }
[[ -f $lib ]] || { echo "FAIL: no $lib"; exit 1; }
# "<k_name>:" starts a kernel; x86 FMA mnemonics are vfmadd*, vfmsub*,
# vfnmadd*, vfnmsub*, vfmaddsub*, vfmsubadd*.
out=$(objdump -d --no-show-raw-insn "$lib" |
      awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 }
           fn ~ /^<k_/ && $2 ~ /^vfn?m(add|sub)/ { print fn, $2 }' | sort | uniq -c)
nk=$(objdump -t "$lib" | grep -c ' k_')
if [[ $nk -eq 0 ]]; then
    echo "FAIL: no kernel symbols k_* in $lib"
    exit 1
fi
if [[ -n $out ]]; then
    echo "FAIL: fused multiply-adds in the reduction kernels:"
    printf '%s\n' "$out" | sed 's/^/   /'
    exit 1
fi
echo "ok: $nk kernels, no fused multiply-add"
