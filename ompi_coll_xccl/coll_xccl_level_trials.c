/*
 * The end of a shared-memory level's trial (xccl_trial_t, algos/): after
 * the trial's last call the ranks agree on the pick, which the latency
 * path's fast way then follows (coll_xccl_level.h has the log lines).
 */
#include "ompi_config.h"

#include <inttypes.h>
#include <stdio.h>

#include "coll_xccl_level.h"

int mca_coll_xccl_level_trial_end(mca_coll_xccl_module_t *m, xccl_coll_t coll, size_t bytes,
                                xccl_trial_t *t, uint64_t t0, uint64_t t1)
{
    if (!xccl_trial_record(t, t0, t1)) {
        return MPI_SUCCESS;
    }
    /* every timed call's last start and last end (xccl_trial_t) */
    uint64_t last[2][2][XCCL_TRIAL_MAX];
    uint64_t med[2] = { 0, 0 };                 /* a tie: shm */
    /* through xccl's own allreduce (its module's entry: the latency path
     * of the level the trial runs on), without a line of its own */
    m->quiet = 1;
    int rc = m->super.coll_allreduce(t->at, last, 2 * 2 * XCCL_TRIAL_MAX, MPI_UINT64_T, MPI_MAX,
                                     m->comm, &m->super);
    m->quiet = 0;
    const int early = t->have < t->samples;
    if (MPI_SUCCESS == rc) {
        xccl_trial_medians(t, last, med);
    }
    const int k = xccl_size_class(bytes);       /* [2^(k-1), 2^k) */
    if (early && (MPI_SUCCESS != rc || !xccl_trial_clear(t, last))) {
        return rc;                              /* the trial goes on */
    }
    const int pick = xccl_trial_decide(t, med);
    if (pick == t->cand[0] && NULL != m->level && k < 64) {
        m->level->lat_picked[coll] |= (uint64_t) 1 << k;
    }
    const size_t lo = k ? (size_t) 1 << (k - 1) : 0;
    if (mca_coll_xccl_component.verbose >= 2) {
        char line[2][XCCL_TRIAL_MAX * 12 + 1];
        for (int j = 0; j < 2; j++) {
            size_t at = 0;
            line[j][0] = '\0';
            for (int i = 0; i < t->have && at < sizeof(line[j]); i++) {
                at += (size_t) snprintf(line[j] + at, sizeof(line[j]) - at, " %.1f",
                                        (double) (t->at[1][j][i] - t->at[0][j][i]) / 1e3);
            }
        }
        mca_coll_xccl_log(2, "trial times %s comm=%u rank=%d bytes=%zu..%zu, this rank's us: "
                          "shm%s; mesh%s", xccl_coll_name(coll), m->cid, m->world_rank, lo,
                          lo ? 2 * lo - 1 : 0, line[0], line[1]);
        /* the readings themselves (ns), a line for each candidate:
         * run_mpi_tests.sh checks them against the calls' own clocks and
         * the agreed medians against them */
        for (int j = 0; j < 2; j++) {
            char clock[XCCL_TRIAL_MAX * 42 + 1];
            size_t at = 0;
            clock[0] = '\0';
            for (int i = 0; i < t->have && at < sizeof(clock); i++) {
                at += (size_t) snprintf(clock + at, sizeof(clock) - at, " %" PRIu64 "-%" PRIu64,
                                        t->at[0][j][i], t->at[1][j][i]);
            }
            mca_coll_xccl_log(2, "trial clock %s comm=%u rank=%d bytes=%zu..%zu %s:%s",
                              xccl_coll_name(coll), m->cid, m->world_rank, lo, lo ? 2 * lo - 1 : 0,
                              j ? "mesh" : "shm", clock);
        }
    }
    mca_coll_xccl_log(1, "trial %s comm=%u rank=%d bytes=%zu..%zu shm=%.1fus mesh=%.1fus%s pick=%s%s",
                      xccl_coll_name(coll), m->cid, m->world_rank, lo, lo ? 2 * lo - 1 : 0,
                      (double) med[0] / 1e3, (double) med[1] / 1e3, early ? " clear" : "",
                      xccl_select_name(coll, pick),
                      MPI_SUCCESS != rc ? " (the agreement failed: shm)" : "");
    return rc;
}
