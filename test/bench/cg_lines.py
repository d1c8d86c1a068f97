#!/usr/bin/env python3
"""Instructions per call by source line, from a callgrind profile.

usage: cg_lines.py CALLGRIND_OUT OBJECT CALLS [TOP]

CALLGRIND_OUT  a file of valgrind --tool=callgrind --dump-instr=yes
OBJECT         part of the path of the shared object to count
               (e.g. mca_coll_xccl.so)
CALLS          how many calls the profile holds (the counts are divided)
TOP            how many lines to print (default 40); then the sum by function

Where the machine has no hardware counters (the 2-vCPU VMs here), the
instructions a call executes are what callgrind can count.  valgrind 3.19
reads no line numbers from gcc 12's DWARF 5, so this script takes
callgrind's instruction addresses and asks addr2line (binutils reads it)
for each one's function and line (inlined code: the innermost).

Profile only what a call does, e.g. at np 2:
  mpirun -np 2 ... valgrind --tool=callgrind --dump-instr=yes \\
      --collect-atstart=no --toggle-collect='*MPI_Bcast' \\
      --callgrind-out-file=cg.%p ./a_bcast_loop
Waits count too (the instructions of a spin): read them off the lines
of the wait loop.
"""
import collections
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, objpat, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    names = {}                     # callgrind's compressed object names
    cost = collections.Counter()   # self cost by instruction address
    obj = None
    skip = False                   # the line after calls= is a call's inclusive cost
    addr = 0
    for line in open(path):
        line = line.rstrip('\n')
        m = re.match(r'(c?ob)=\((\d+)\)(?: (.*))?', line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == 'ob':
                obj = names.get(m.group(2), '')
            continue
        if line.startswith('calls='):
            skip = True
            continue
        if not line or line[0] not in '0123456789+-*':
            continue
        parts = line.split()
        a = parts[0]
        if a.startswith('0x'):
            addr = int(a, 16)
        elif a[0] in '+-':
            addr += int(a)
        if skip:
            skip = False
            continue
        if obj and objpat in obj and len(parts) >= 3:
            cost[addr] += int(parts[-1])
    objs = [o for o in names.values() if objpat in o]
    if not objs or not cost:
        sys.exit(f"nothing of {objpat} in {path}")
    addrs = sorted(cost)
    out = subprocess.run(['addr2line', '-e', objs[0], '-f', '-C'] + [hex(a) for a in addrs],
                         capture_output=True, text=True, check=True).stdout.split('\n')
    by_line, by_fn = collections.Counter(), collections.Counter()
    for i, a in enumerate(addrs):
        fn, loc = out[2 * i], re.sub(r' \(discriminator \d+\)', '', out[2 * i + 1])
        by_line[(fn, loc)] += cost[a]
        by_fn[fn] += cost[a]
    print(f"# {sum(cost.values()) / calls:.1f} instructions a call in {objs[0]}")
    for (fn, loc), c in by_line.most_common(top):
        print(f"{c / calls:8.1f}  {fn:40s} {loc}")
    print("# by function")
    for fn, c in by_fn.most_common(top):
        print(f"{c / calls:8.1f}  {fn}")


if __name__ == '__main__':
    main()
