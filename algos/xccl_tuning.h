/*
 * xccl algorithms, tuning files: rules that pick an algorithm by
 * collective, ranks and bytes.  Section of the algos API;
 * algos/xccl_algos.h includes every section.
 */
#ifndef XCCL_TUNING_H
#define XCCL_TUNING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Tuning file                                                              */
/* ------------------------------------------------------------------------ */

/* One rule per line, the first rule that matches a call wins:
 *
 *     # comment
 *     <collective> ranks=<lo>-<hi> bytes=<lo>-<hi> algo=<name>
 *
 * ranks: lo <= communicator size <= hi; bytes: lo <= bytes < hi; either
 * bound may be "*" (unbounded), a range may be "*" alone; sizes take K, M,
 * G suffixes (powers of 1024).  <name> is an algorithm of the collective,
 * or "fallback" (hand the call to Open MPI's module) or "auto" (cost model).
 * bytes counts as in the verbose line (allgather: total received). */
typedef struct {
    char coll[32];
    char algo[32];
    long min_ranks, max_ranks;         /* -1: unbounded */
    unsigned long long min_bytes, max_bytes;   /* max 0: unbounded */
    int line;
} xccl_tuning_rule_t;

typedef struct {
    xccl_tuning_rule_t *rules;
    size_t n;
} xccl_tuning_t;

/* Parses text (NUL-terminated).  0, or -1 with err describing the first bad
 * line ("line 3: ..."); *t is empty then. */
int xccl_tuning_parse(const char *text, xccl_tuning_t *t, char *err, size_t errlen);
/* The rule for this call, or NULL. */
const xccl_tuning_rule_t *xccl_tuning_lookup(const xccl_tuning_t *t, const char *coll, int ranks,
                                             unsigned long long bytes);
void xccl_tuning_free(xccl_tuning_t *t);

#ifdef __cplusplus
}
#endif

#endif
