/*
 * The verbose log (coll_xccl_log.c): lines at a level, errors of a call,
 * the line of each call and the summary at close.
 */
#ifndef MCA_COLL_XCCL_LOG_H
#define MCA_COLL_XCCL_LOG_H

#include "coll_xccl.h"

BEGIN_C_DECLS

/* One line at verbosity >= level, prefixed
 * "xccl: "; nothing is formatted below the level. */
void mca_coll_xccl_log(int level, const char *fmt, ...) __opal_attribute_format__(__printf__, 2, 3);
/* Logs an error of a call (verbose >= 1), counts it, returns err. */
int mca_coll_xccl_error(mca_coll_xccl_module_t *m, xccl_coll_t coll, int err, const char *what);
/* The per-collective summary of the verbose log, at close. */
void mca_coll_xccl_log_summary(void);


/* The line of a call: algo (an index) or fallback (a reason); counts it
 * for the summary.  via: peer access, or NULL.  Nothing at verbose 0. */
void mca_coll_xccl_log_call_line(const mca_coll_xccl_module_t *m, xccl_coll_t coll, int nb,
                                 size_t bytes, int algo, double predicted_us,
                                 const char *fallback, const char *via);
static inline void mca_coll_xccl_log_call(const mca_coll_xccl_module_t *m, xccl_coll_t coll,
                                          int nb, size_t bytes, int algo, double predicted_us,
                                          const char *fallback, const char *via)
{
    if (mca_coll_xccl_component.verbose >= 1 && !m->quiet) {
        mca_coll_xccl_log_call_line(m, coll, nb, bytes, algo, predicted_us, fallback, via);
    }
}

END_C_DECLS

#endif
