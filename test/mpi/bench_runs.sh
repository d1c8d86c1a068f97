# The tools as the docs use them (xccl_calibrate, xccl_bench) in run_mpi_tests.sh's
# shell: sourced by it, its helpers (selected, run_mpi, per_rank_output,
# check_result, check_counts, check_forced, judge, indent, finish) and
# variables (bindir, logdir, common_args, common_base, run_timeout) in
# scope.
#
# xccl_calibrate.np2: the cost file has the six terms, each within sane
#   bounds; xccl_simulate -F takes it; the component takes it (.component:
#   verbose 2 prints the file's values) or refuses a bad one with its reason
#   (.bad_file: the built-in model stays, the job runs).
# xccl_bench.nb_moving_root.np{2,3}: xccl_bench -i -t (the xccl column
#   nonblocking, bcast's root moving every call), 8 B .. 256 KiB: exit 0,
#   "# result: all xccl checks passed", nonblocking bcasts through xccl.
# xccl_bench.all_persistent.np3: xccl_bench -c all -P, 8 B .. 64 KiB: every
#   check of both columns and of the persistent ones passes, and persistent
#   allreduce starts run through xccl.

# xccl_calibrate measures the cost model on this machine, the shared-memory
# level's flag and peer terms included; the component takes its file (the
# verbose-2 init line shows the file's six values) and xccl_simulate -F
# too.  A bad file is refused with a reason: the built-in model stays.
# check_cost_file <file>: xccl_calibrate's six terms in order, each within
# bounds no machine leaves (alpha 10 ns..1 ms, copies and reductions
# 0.01-1000 GB/s, a flag 1 ns..100 us, peer >= 0 and < 1 ns per byte).
check_cost_file() {
    awk '
        BEGIN { split("alpha beta gamma delta flag peer", want, " ")
                lo["alpha"] = 1e-8;  hi["alpha"] = 1e-3;  lo["flag"] = 1e-9; hi["flag"] = 1e-4
                lo["beta"] = lo["gamma"] = lo["delta"] = 1e-12
                hi["beta"] = hi["gamma"] = hi["delta"] = 1e-7
                lo["peer"] = 0;      hi["peer"] = 1e-9 }
        { for (i = 1; i <= NF; i++) {
              n++; eq = index($i, "="); k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
              if (k != want[n]) { printf "term %d is \"%s\", want %s\n", n, $i, want[n]; bad = 1 }
              else if (v !~ /^[0-9.]+(e[-+]?[0-9]+)?$/ || v + 0 < lo[k] || v + 0 >= hi[k]) {
                  printf "%s outside [%g, %g)\n", $i, lo[k], hi[k]; bad = 1 } } }
        END { if (n != 6) { printf "%d terms, want 6\n", n; bad = 1 }; exit bad }' "$1"
}
name=xccl_calibrate.np2
if selected "$name"; then
    cost=$logdir/calibrate.cost
    run_mpi "$name" 2 "$bindir/xccl_calibrate" -o "$cost"
    ok=0
    problems=$({
        { [[ $run_rc -eq 0 ]] || { echo "$name: exit status $run_rc"; false; }; } &&
        check_cost_file "$cost" &&
        { sim=$("$bindir/xccl_simulate" -c allgather -n 2 -S 1M -P read -s 64K -F "$cost") &&
          grep -q 'shm flag' <<<"$sim" || { echo "$name: xccl_simulate -F refused the file"; false; }; }
    } 2>&1) || ok=1
    if ((ok == 0)); then
        saved=("${common_args[@]}")
        common_args=("${common_base[@]}" --mca coll_xccl_small_msg_bytes 0)
        # the component's model is the file's, every term
        run_mpi "$name.component" 2 --mca coll_xccl_verbose 2 --mca coll_xccl_cost_file "$cost" \
            "$bindir/xccl_mpi_check" -q
        problems=$({ check_result "$name.component" && {
            init=$(per_rank_output "$name.component" 1 | grep -m1 'init: cost model ' || true)
            [[ $init == *"init: cost model $cost: $(tr -s ' \n' ' ' <"$cost" | sed 's/ $//')"* ]] ||
                { echo "$name: rank 1's model line '$init' is not the file's '$(cat "$cost")'"; false; }; }
        } 2>&1) || ok=1
        # a bad file: said why, the built-in model kept, the job runs
        echo "alpha=1e-6 beta=2e-10 gamma=2e-10 flag=-1" >"$logdir/bad.cost"
        run_mpi "$name.bad_file" 2 --mca coll_xccl_verbose 2 --mca coll_xccl_cost_file "$logdir/bad.cost" \
            "$bindir/xccl_mpi_check" -q
        problems+=$({ check_result "$name.bad_file" && {
            out=$(per_rank_output "$name.bad_file" 0)
            grep -q "coll_xccl_cost_file $logdir/bad.cost: flag= needs a number >= 0" <<<"$out" &&
            grep -q 'init: cost model built-in: ' <<<"$out" ||
                { echo "$name: a bad cost file was not refused with its reason"; false; }; }
        } 2>&1) || ok=1
        common_args=("${saved[@]}")
    fi
    indent "$problems"
    finish "$name" "$ok"
fi

# xccl_bench as the GPU benchmark runs and the docs use it, a short sweep: the
# xccl column nonblocking (-i: MPI_I<collective> then MPI_Wait) and bcast's
# root moving on every call (-t); every xccl result checked by the bench
# ("# result: all xccl checks passed"), np 2 and 3.
for np in 2 3; do
    name=xccl_bench.nb_moving_root.np$np
    selected "$name" || continue
    run_mpi "$name" "$np" "$bindir/xccl_bench" -i -t -b 8 -e 256K -f 8 -r 2 -q
    ok=0
    problems=$({
        check_bench "$name" &&
        { grep -qE '^xccl: ibcast .* (algo|via)=' "$logdir/$name.log" ||
            { echo "$name: no nonblocking bcast ran through xccl"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
done

# The same bench over every collective with its persistent form (-P):
# every xccl and stock result checked, the persistent columns too; np 3.
name=xccl_bench.all_persistent.np3
if selected "$name"; then
    run_mpi "$name" 3 "$bindir/xccl_bench" -c all -P -b 8 -e 64K -f 16 -r 1 -q
    ok=0
    problems=$({
        check_bench "$name" &&
        { ! grep -qE '^ *[0-9].*FAIL' "$logdir/$name.log" || { echo "$name: a check failed"; false; }; } &&
        { grep -qE '^xccl: allreduce .* persistent$' "$logdir/$name.log" ||
            { echo "$name: no persistent start ran through xccl"; false; }; }
    } 2>&1) || ok=1
    indent "$problems"
    finish "$name" "$ok"
fi
