#!/usr/bin/env python3
"""How the level trials' early check would decide, against the full trial.

Reads the verbose-2 output of every rank of runs made with full trials
(coll_xccl_verbose 2: "xccl: trial clock ..." readings and the "xccl: trial
... pick=" lines) and, per trial (communicator, collective, size class):
the agreed span of each timed call (last rank's end minus last rank's
start), the early check on the first block of each candidate (every span of
one at least MARGIN times every span of the other), and the full trial's
pick.  Prints one line per trial and a summary: how many trials the check
would have ended, and in how many of those its pick differs from the full
trial's.

usage: trial_check.py [-m MARGIN] [-k FIRST] FILE...
(a FILE per run, every rank's output in it: mpirun --output-filename,
then cat each run's rank files into one)
"""
import argparse
import collections
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("-m", "--margin", type=float, default=1.5)
ap.add_argument("-k", "--first", type=int, default=2, help="timed calls of each candidate at the check")
ap.add_argument("files", nargs="+")
o = ap.parse_args()

clock = re.compile(r"xccl: trial clock (\S+) comm=(\d+) rank=(\d+) bytes=(\S+) (shm|mesh):(.*)")
pick = re.compile(r"xccl: trial (\S+) comm=(\d+) rank=(\d+) bytes=(\S+) .* pick=(\S+)")
spans = collections.defaultdict(lambda: collections.defaultdict(dict))   # key -> cand -> rank -> [(s, e)]
picks = {}
for i, f in enumerate(o.files):
    for line in open(f, errors="replace"):
        m = clock.search(line)
        if m:
            coll, comm, rank, b, cand, rest = m.groups()
            try:
                spans[(i, comm, coll, b)][cand][rank] = [tuple(map(int, x.split("-"))) for x in rest.split()]
            except ValueError:                 # a line broken by another's output
                pass
            continue
        m = pick.search(line)
        if m and " clock " not in line:
            coll, comm, rank, b, p = m.groups()
            picks[(i, comm, coll, b)] = p

n = ended = differ = 0
for key in sorted(spans, key=str):
    if key not in picks:
        continue
    agreed = {}
    for cand, ranks in spans[key].items():
        cnt = min(len(v) for v in ranks.values())
        agreed[cand] = [max(v[j][1] for v in ranks.values()) - max(v[j][0] for v in ranks.values())
                        for j in range(cnt)]
    if len(agreed) != 2:
        continue
    n += 1
    s, m = agreed["shm"][:o.first], agreed["mesh"][:o.first]
    early = None
    if min(m) >= o.margin * max(s):
        early = "shm"
    elif min(s) >= o.margin * max(m):
        early = "mesh"
    full = picks[key]
    mark = ""
    if early:
        ended += 1
        if early != full:
            differ += 1
            mark = "  DIFFERS"
    print("%-9s %-22s shm %s mesh %s check=%s full=%s%s" % (key[2], key[3],
          " ".join("%.0f" % (x / 1e3) for x in agreed["shm"]),
          " ".join("%.0f" % (x / 1e3) for x in agreed["mesh"]), early or "-", full, mark))
print("trials %d, ended by the check %d, of those picking otherwise than the full trial %d (margin %.2f)"
      % (n, ended, differ, o.margin))
