/*
 * The verbose log and its per-collective counts.  Calls nothing of the
 * other glue files.  At coll_xccl_verbose 0 (the default) a call costs one
 * comparison here: nothing is formatted and nothing is counted, since the
 * counts only feed the summary printed at verbose >= 1.
 */
#include "ompi_config.h"

#include <stdarg.h>
#include <stdio.h>

#include "opal/util/error.h"
#include "opal/util/output.h"

#include "coll_xccl_log.h"

void mca_coll_xccl_log(int level, const char *fmt, ...)
{
    char line[1024];                  /* a trial clock line: 16 readings */
    va_list ap;
    if (mca_coll_xccl_component.verbose < level) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    opal_output(mca_coll_xccl_component.output, "xccl: %s", line);
}

void mca_coll_xccl_log_call_line(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int nb,
                                 size_t bytes, int algo, double predicted_us,
                                 const char *fallback, const char *via)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    xccl_coll_stats_t *st = &c->stats[coll];
    /* Calls on several threads at once (MPI_THREAD_MULTIPLE) */
    __atomic_fetch_add(&st->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->bytes, bytes, __ATOMIC_RELAXED);
    if (fallback) {
        __atomic_fetch_add(&st->fallbacks, 1, __ATOMIC_RELAXED);
        mca_coll_xccl_log(1, "%s%s comm=%u rank=%d bytes=%zu fallback=%s size=%d%s", 1 == nb ? "i" : "",
                          xccl_coll_name(coll), m->cid, m->world_rank, bytes, fallback, m->size,
                          2 == nb ? " persistent" : "");
        return;
    }
    if (algo >= 0 && algo < XCCL_SEL_MAX) {
        __atomic_fetch_add(&st->algo_calls[algo], 1, __ATOMIC_RELAXED);
    }
    char pred[48] = "";
    if (predicted_us >= 0) {
        snprintf(pred, sizeof(pred), " predicted_us=%.1f", predicted_us);
    }
    mca_coll_xccl_log(1, "%s%s comm=%u rank=%d bytes=%zu algo=%s size=%d%s%s%s%s",
                      1 == nb ? "i" : "", xccl_coll_name(coll), m->cid, m->world_rank, bytes,
                      xccl_select_name(coll, algo), m->size, pred, via ? " via=" : "", via ? via : "",
                      2 == nb ? " persistent" : "");
}

int mca_coll_xccl_error(mca_coll_xccl_module_t *m, xccl_coll_t coll, int err, const char *what)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    __atomic_fetch_add(&c->stats[coll].errors, 1, __ATOMIC_RELAXED);
    if (c->verbose < 1) {
        return err;
    }
    /* What the call returns, by name: an MPI error class, or Open MPI's
     * internal code (the MPI layer turns that into a class). */
    char code[MPI_MAX_ERROR_STRING] = "?";
    int len = 0;
    if (err > 0 && MPI_SUCCESS == PMPI_Error_string(err, code, &len)) {
        code[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    } else if (err < 0) {
        snprintf(code, sizeof(code), "%s", opal_strerror(err));
    }
    mca_coll_xccl_log(1, "error %s comm=%u rank=%d: %s; returns %s", xccl_coll_name(coll),
                      m->cid, m->world_rank, what, code);
    return err;
}

void mca_coll_xccl_log_summary(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    for (int i = 0; i < XCCL_NCOLL; i++) {
        const xccl_coll_t coll = (xccl_coll_t) i;
        const xccl_coll_stats_t *s = &c->stats[i];
        char algos[256] = "";
        int n = 0;
        if (0 == s->calls) {
            continue;
        }
        for (int a = XCCL_SEL_FIRST; a < XCCL_SEL_MAX && xccl_select_name(coll, a); a++) {
            n += snprintf(algos + n, sizeof(algos) - (size_t) n, " %s=%llu",
                          xccl_select_name(coll, a), (unsigned long long) s->algo_calls[a]);
        }
        mca_coll_xccl_log(1, "summary %s rank=%d calls=%llu bytes=%llu%s fallback=%llu errors=%llu",
                          xccl_coll_name(coll), c->world_rank, (unsigned long long) s->calls,
                          (unsigned long long) s->bytes, algos,
                          (unsigned long long) s->fallbacks, (unsigned long long) s->errors);
    }
}
