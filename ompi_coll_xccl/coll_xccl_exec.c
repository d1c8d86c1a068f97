/*
 * A schedule on the communicator's transport (UCX, or Open MPI's PML), run
 * to completion here or set up for a request (coll_xccl_request.c).
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "opal/runtime/opal_progress.h"

#include "coll_xccl_exec.h"
#include "coll_xccl_log.h"

/* Unmet flag tests between two calls of Open MPI's progress engine while
 * a transfer-free schedule waits (below; mca_coll_xccl_spins_per_progress). */
#define SPINS_PER_PROGRESS 64u

static int ensure_scratch(mca_coll_xccl_module_t *m, size_t bytes)
{
    if (bytes <= m->scratch_size) {
        return 0;
    }
    void *p = malloc(bytes);
    if (NULL == p) {
        return -1;
    }
    free(m->scratch);
    m->scratch = p;
    m->scratch_size = bytes;
    return 0;
}

int mca_coll_xccl_exec_failed(mca_coll_xccl_module_t *m, xccl_coll_t coll)
{
    /* A transfer (UCX says why), or a step's reduction or staging copy
     * (which logged why as it failed). */
    char what[300];
    const char *ucx = xccl_ucx_error();
    if (!m->ucx) {
        snprintf(what, sizeof(what), "a step failed (a transfer over the PML, or logged above)");
    } else if (ucx[0]) {
        snprintf(what, sizeof(what), "transfer failed: %s", ucx);
        xccl_ucx_clear_error();
    } else {
        snprintf(what, sizeof(what), "a step of the schedule failed (logged above)");
    }
    return mca_coll_xccl_error(m, coll, MPI_ERR_INTERN, what);
}

int mca_coll_xccl_exec_init(xccl_exec_t *e, mca_coll_xccl_module_t *m, const xccl_sched_t *s,
                            const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red,
                            void *scratch, uint32_t seq)
{
    void *bufs[XCCL_NBUF] = { h->bufs[XCCL_BUF_SEND], h->bufs[XCCL_BUF_RECV],
                              h->bufs[XCCL_BUF_SCRATCH] ? h->bufs[XCCL_BUF_SCRATCH] : scratch,
                              h->bufs[XCCL_BUF_SLOT] };
    if (0 != xccl_exec_init(e, s, h->transport ? h->transport : &m->transport, bufs,
                            h->reduce ? h->reduce : mca_coll_xccl_reduce_cb,
                            h->reduce ? h->reduce_ctx : red, seq)) {
        return -1;
    }
    xccl_exec_set_gate(e, h->gate);
    xccl_exec_set_copy(e, h->copy, h->copy_ctx);
    xccl_exec_set_peer(e, h->peer);
    xccl_exec_set_owed(e, h->owed);
    return 0;
}

int mca_coll_xccl_exec_run(mca_coll_xccl_module_t *m, xccl_coll_t coll, const xccl_sched_t *s,
                           const mca_coll_xccl_exec_hooks_t *h, mca_coll_xccl_reduce_t *red)
{
    xccl_exec_t e;
    int rc;
    if (NULL == h->bufs[XCCL_BUF_SCRATCH] && 0 != ensure_scratch(m, s->scratch_bytes)) {
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for scratch");
    }
    if (0 != mca_coll_xccl_exec_init(&e, m, s, h, red, m->scratch, m->seq++)) {
        return mca_coll_xccl_error(m, coll, OMPI_ERR_OUT_OF_RESOURCE, "out of memory for requests");
    }
    /* A schedule without transfers (the shared-memory level: flags and
     * copies) completes by itself: Open MPI's progress engine (other
     * requests, yielding when oversubscribed), which costs far more than
     * a flag test, runs only every SPINS_PER_PROGRESS unmet tests. */
    const unsigned every = 0 == s->max_xfers ? mca_coll_xccl_spins_per_progress(SPINS_PER_PROGRESS) : 1;
    unsigned spins = 0;
    while (0 == (rc = xccl_exec_progress(&e))) {
        if (++spins >= every) {
            spins = 0;
            opal_progress();
        }
    }
    xccl_exec_fini(&e);
    return 1 == rc ? MPI_SUCCESS : mca_coll_xccl_exec_failed(m, coll);
}
