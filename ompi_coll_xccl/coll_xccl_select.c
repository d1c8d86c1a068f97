/*
 * The component's side of selection (algos/select.c decides): the
 * algorithm and schedule of a call that xccl runs, from the communicator's
 * cache (whether it runs it: xccl_select_fallback, in coll_xccl_decide.c).
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "coll_xccl_select.h"
#include "coll_xccl_log.h"

/* At verbose 2, what the model predicted when it decided. */
static void log_model(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                      const xccl_coll_args_t *a, size_t bytes, size_t es)
{
    double t[XCCL_CATALOG_MAX];
    int n;
    (void) xccl_select_model(&mca_coll_xccl_component.policy, coll, a, es, t, &n);
    for (int i = 0; i < n; i++) {
        mca_coll_xccl_log(2, "model %s comm=%u bytes=%zu %s=%.1fus", xccl_coll_name(coll), m->cid,
                          bytes, xccl_select_name(coll, XCCL_SEL_FIRST + i), t[i] * 1e6);
    }
}

const xccl_sched_t *mca_coll_xccl_select_schedule(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                                  const xccl_coll_args_t *a, size_t bytes,
                                                  size_t es, int algo, int *used,
                                                  double *predicted_us, xccl_trial_t **trial)
{
    const xccl_sched_t *s = NULL;
    int fresh = 0;
    *predicted_us = -1.0;
    if (NULL != trial) {
        *trial = NULL;
    }
    OPAL_THREAD_LOCK(&m->cache_lock);
    if (NULL == m->cache) {
        m->cache = calloc(1, sizeof(*m->cache));
    }
    if (NULL != m->cache) {
        if (algo < XCCL_SEL_FIRST) {
            xccl_selection_t sel = xccl_select_algo(&mca_coll_xccl_component.policy, m->cache,
                                                    coll, a, m->size, bytes, es);
            algo = sel.algo;
            *predicted_us = sel.predicted_us;
            fresh = sel.fresh;
            if (NULL != trial) {
                *trial = sel.trial;
            }
        }
        s = xccl_select_schedule(m->cache, coll, algo, a, m->rank, m->size, es, used);
    }
    OPAL_THREAD_UNLOCK(&m->cache_lock);
    if (fresh && mca_coll_xccl_component.verbose >= 2) {
        log_model(m, coll, a, bytes, es);
    }
    if (NULL == s) {
        mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory building the schedule");
    }
    return s;
}

void mca_coll_xccl_select_fini(mca_coll_xccl_module_t *m)
{
    if (NULL != m->cache) {
        mca_coll_xccl_log(2, "comm comm=%u rank=%d: schedules built %llu, reused %llu", m->cid,
                          m->world_rank, m->cache->builds, m->cache->hits);
        xccl_select_cache_fini(m->cache);
        free(m->cache);
        m->cache = NULL;
    }
}
