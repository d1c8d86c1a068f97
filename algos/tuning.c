/* The tuning file: collective x communicator-size range x byte range -> algorithm. */
#include "xccl_tuning.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<n>[K|M|G]" or "*" (unbounded: *out = 0, *unbounded = 1). */
static int parse_number(const char *s, size_t len, unsigned long long *out, int *unbounded)
{
    char buf[32];
    char *end;
    *unbounded = 0;
    if (1 == len && '*' == s[0]) {
        *unbounded = 1;
        *out = 0;
        return 0;
    }
    if (0 == len || len >= sizeof(buf) || !isdigit((unsigned char) s[0])) {
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    unsigned long long v = strtoull(buf, &end, 10);
    switch (toupper((unsigned char) *end)) {
    case 'K': v <<= 10; end++; break;
    case 'M': v <<= 20; end++; break;
    case 'G': v <<= 30; end++; break;
    default: break;
    }
    if ('\0' != *end) {
        return -1;
    }
    *out = v;
    return 0;
}

/* "lo-hi" or "*". */
static int parse_range(const char *s, unsigned long long *lo, int *lo_inf, unsigned long long *hi,
                       int *hi_inf)
{
    size_t len = strlen(s);
    if (1 == len && '*' == s[0]) {
        *lo = 0;
        *lo_inf = 1;
        *hi = 0;
        *hi_inf = 1;
        return 0;
    }
    const char *dash = strchr(s, '-');
    if (NULL == dash) {
        return -1;
    }
    return (0 == parse_number(s, (size_t) (dash - s), lo, lo_inf) &&
            0 == parse_number(dash + 1, strlen(dash + 1), hi, hi_inf)) ? 0 : -1;
}

static int parse_line(char *line, xccl_tuning_rule_t *r, char *err, size_t errlen)
{
    char *tok[5];
    int n = 0;
    for (char *p = strtok(line, " \t"); p && n < 5; p = strtok(NULL, " \t")) {
        tok[n++] = p;
    }
    if (4 != n) {
        snprintf(err, errlen, "want \"<collective> ranks=<lo>-<hi> bytes=<lo>-<hi> algo=<name>\"");
        return -1;
    }
    if (strncmp(tok[1], "ranks=", 6) || strncmp(tok[2], "bytes=", 6) ||
        strncmp(tok[3], "algo=", 5)) {
        snprintf(err, errlen, "fields must be ranks=, bytes=, algo= in this order");
        return -1;
    }
    unsigned long long lo, hi;
    int lo_inf, hi_inf;
    if (0 != parse_range(tok[1] + 6, &lo, &lo_inf, &hi, &hi_inf)) {
        snprintf(err, errlen, "bad ranks range \"%s\"", tok[1] + 6);
        return -1;
    }
    r->min_ranks = lo_inf ? -1 : (long) lo;
    r->max_ranks = hi_inf ? -1 : (long) hi;
    if (0 != parse_range(tok[2] + 6, &lo, &lo_inf, &hi, &hi_inf)) {
        snprintf(err, errlen, "bad bytes range \"%s\"", tok[2] + 6);
        return -1;
    }
    r->min_bytes = lo_inf ? 0 : lo;
    r->max_bytes = hi_inf ? 0 : hi;
    if (strlen(tok[0]) >= sizeof(r->coll) || strlen(tok[3] + 5) >= sizeof(r->algo) ||
        '\0' == tok[3][5]) {
        snprintf(err, errlen, "collective or algorithm name too long or empty");
        return -1;
    }
    strcpy(r->coll, tok[0]);
    strcpy(r->algo, tok[3] + 5);
    return 0;
}

int xccl_tuning_parse(const char *text, xccl_tuning_t *t, char *err, size_t errlen)
{
    char *copy = strdup(text), *save = NULL;
    size_t cap = 0;
    int lineno = 0;
    t->rules = NULL;
    t->n = 0;
    if (NULL == copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Lines are split by hand: strtok_r on "\n" would skip empty lines and
     * shift the line numbers in messages. */
    for (char *line = copy; line; line = save) {
        save = strchr(line, '\n');
        if (save) {
            *save++ = '\0';
        }
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) {
            *hash = '\0';
        }
        char *p = line;
        while (isspace((unsigned char) *p)) {
            p++;
        }
        if ('\0' == *p) {
            continue;
        }
        if (t->n == cap) {
            cap = cap ? 2 * cap : 16;
            xccl_tuning_rule_t *rules = realloc(t->rules, cap * sizeof(*rules));
            if (NULL == rules) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            t->rules = rules;
        }
        char why[160];
        if (0 != parse_line(p, &t->rules[t->n], why, sizeof(why))) {
            snprintf(err, errlen, "line %d: %s", lineno, why);
            goto fail;
        }
        t->rules[t->n++].line = lineno;
    }
    free(copy);
    return 0;
fail:
    free(copy);
    xccl_tuning_free(t);
    return -1;
}

const xccl_tuning_rule_t *xccl_tuning_lookup(const xccl_tuning_t *t, const char *coll, int ranks,
                                             unsigned long long bytes)
{
    for (size_t i = 0; i < t->n; i++) {
        const xccl_tuning_rule_t *r = &t->rules[i];
        if (0 == strcmp(r->coll, coll) &&
            (r->min_ranks < 0 || ranks >= r->min_ranks) &&
            (r->max_ranks < 0 || ranks <= r->max_ranks) &&
            bytes >= r->min_bytes && (0 == r->max_bytes || bytes < r->max_bytes)) {
            return r;
        }
    }
    return NULL;
}

void xccl_tuning_free(xccl_tuning_t *t)
{
    free(t->rules);
    t->rules = NULL;
    t->n = 0;
}
