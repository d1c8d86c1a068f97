/*
 * The level trials' picks kept by this process and on file
 * (coll_xccl_picks.h).
 */
#include "ompi_config.h"

#include "coll_xccl_picks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "algos/xccl_select.h"
#include "coll_xccl.h"
#include "coll_xccl_log.h"

/*
 * Kept per collective and size class, a few situations each; a later pick
 * of a situation replaces an earlier one, and so may another situation
 * that hashes to the same way.  Entries are packed words, read and written
 * atomically (two threads may end trials on two communicators at once):
 * the situation above bit 9, whether it came from the file at bit 8, the
 * pick in the low 8 bits; 0 empty.
 */
#define WAYS 4
#define CLASSES 65
#define NODE_BITS 21
static uint64_t kept[XCCL_NCOLL][CLASSES][WAYS];

/* The situation as a word (never 0), 0 where it cannot be one. */
static uint64_t situation_key(const xccl_situation_t *s)
{
    if (s->ranks < 1 || s->node < 0 || s->node >= 1 << NODE_BITS) {
        return 0;
    }
    return (uint64_t) s->ranks << (NODE_BITS + 2) | (uint64_t) s->node << 2 |
           (uint64_t) !!s->noisy << 1 | 1u;
}

static xccl_situation_t situation_of(uint64_t key)
{
    xccl_situation_t s = { .ranks = (int) (key >> (NODE_BITS + 2)),
                           .node = (int) (key >> 2 & ((1u << NODE_BITS) - 1)),
                           .noisy = (int) (key >> 1 & 1) };
    return s;
}

static int valid(int coll, int k)
{
    return coll >= 0 && coll < XCCL_NCOLL && k >= 0 && k < CLASSES;
}

static void put(int coll, int k, uint64_t key, int pick, int from_file)
{
    if (0 == key || pick <= 0 || pick > 0xff || !valid(coll, k)) {
        return;
    }
    __atomic_store_n(&kept[coll][k][key % WAYS], key << 9 | (uint64_t) !!from_file << 8 | (uint64_t) pick,
                     __ATOMIC_RELAXED);
}

int xccl_picks_get(xccl_coll_t coll, int k, const xccl_situation_t *s, int *from_file)
{
    const uint64_t key = situation_key(s);
    if (0 == key || !valid((int) coll, k)) {
        return 0;
    }
    const uint64_t e = __atomic_load_n(&kept[coll][k][key % WAYS], __ATOMIC_RELAXED);
    if (e >> 9 != key) {
        return 0;
    }
    if (NULL != from_file) {
        *from_file = (int) (e >> 8 & 1);
    }
    return (int) (e & 0xff);
}

void xccl_picks_put(xccl_coll_t coll, int k, const xccl_situation_t *s, int pick)
{
    put((int) coll, k, situation_key(s), pick, 0);
}

void xccl_picks_clear(void)
{
    memset(kept, 0, sizeof(kept));
}

char *xccl_picks_path(const char *param)
{
    if (NULL == param || '\0' == param[0] || 0 == strcmp(param, "none")) {
        return NULL;
    }
    if (0 != strcmp(param, "auto")) {
        return strdup(param);
    }
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char host[256] = "";
    if (0 != gethostname(host, sizeof(host) - 1) || '\0' == host[0]) {
        return NULL;
    }
    char *path = NULL;
    int n = -1;
    if (NULL != cache && '/' == cache[0]) {
        n = asprintf(&path, "%s/xccl/picks-%s", cache, host);
    } else if (NULL != home && '/' == home[0]) {
        n = asprintf(&path, "%s/.cache/xccl/picks-%s", home, host);
    }
    return n < 0 ? NULL : path;
}

/* One pick as a line of the file holds it. */
typedef struct {
    int coll, k, pick;
    uint64_t key;
    long long when;
} line_t;

/* Parses a line: 1 a pick, 0 blank or a comment, -1 not a line of the
 * file. */
static int parse_line(const char *text, line_t *l)
{
    char coll[32], how[8], algo[32], end[2];
    xccl_situation_t s;
    text += strspn(text, " \t");
    if ('\0' == text[0] || '\n' == text[0] || '#' == text[0]) {
        return 0;
    }
    if (7 != sscanf(text, "%31s %d %d %d %7s %31s %lld %1s", coll, &l->k, &s.ranks, &s.node, how,
                    algo, &l->when, end)) {
        return -1;
    }
    l->coll = xccl_coll_index(coll);
    s.noisy = 0 == strcmp(how, "noisy");
    l->key = situation_key(&s);
    l->pick = l->coll < 0 ? -1 : xccl_select_index((xccl_coll_t) l->coll, algo);
    if (!valid(l->coll, l->k) || 0 == l->key || (!s.noisy && 0 != strcmp(how, "quiet")) ||
        l->pick <= 0 || l->pick > 0xff || l->when < 0) {
        return -1;
    }
    return 1;
}

/* The file's lines made since `since`, into *out (malloc'd, *n of them):
 * 0, or -1 on a bad file (err says why; a missing file is none). */
static int read_lines(const char *path, time_t since, line_t **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        if (ENOENT == errno) {
            return 0;
        }
        snprintf(err, errlen, "cannot read it (%s)", strerror(errno));
        return -1;
    }
    char text[256];
    int at = 0, rc = 0, cap = 0;
    while (NULL != fgets(text, sizeof(text), f)) {
        line_t l;
        at++;
        const int got = NULL == strchr(text, '\n') && !feof(f) ? -1 : parse_line(text, &l);
        if (got < 0) {
            snprintf(err, errlen, "line %d is not \"<collective> <size class> <ranks> <ranks on "
                     "the node> quiet|noisy <algorithm> <unix time>\"", at);
            rc = -1;
            break;
        }
        if (0 == got || l.when < (long long) since) {
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            line_t *more = realloc(*out, (size_t) cap * sizeof(line_t));
            if (NULL == more) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                break;
            }
            *out = more;
        }
        (*out)[(*n)++] = l;
    }
    fclose(f);
    if (0 != rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int xccl_picks_load(const char *path, time_t since, char *err, size_t errlen)
{
    line_t *lines;
    int n;
    if (0 != read_lines(path, since, &lines, &n, err, errlen)) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        put(lines[i].coll, lines[i].k, lines[i].key, lines[i].pick, 1);
    }
    free(lines);
    return n;
}

static int write_line(FILE *f, int coll, int k, uint64_t key, int pick, long long when)
{
    const xccl_situation_t s = situation_of(key);
    return fprintf(f, "%s %d %d %d %s %s %lld\n", xccl_coll_name((xccl_coll_t) coll), k, s.ranks,
                   s.node, s.noisy ? "noisy" : "quiet", xccl_select_name((xccl_coll_t) coll, pick),
                   when) < 0 ? -1 : 0;
}

/* Creates the directories above path (mkdir -p of its dirname). */
static int make_dirs(const char *path)
{
    char *dir = strdup(path);
    if (NULL == dir) {
        return -1;
    }
    for (char *p = strchr(dir + 1, '/'); NULL != p; p = strchr(p + 1, '/')) {
        *p = '\0';
        if (0 != mkdir(dir, 0700) && EEXIST != errno) {
            free(dir);
            return -1;
        }
        *p = '/';
    }
    free(dir);
    return 0;
}

/* Whether this process kept a pick of (coll, k, key) itself. */
static int own(int coll, int k, uint64_t key)
{
    const uint64_t e = __atomic_load_n(&kept[coll][k][key % WAYS], __ATOMIC_RELAXED);
    return 0 != e && e >> 9 == key && !(e >> 8 & 1);
}

int xccl_picks_save(const char *path, time_t since, time_t now, char *err, size_t errlen)
{
    int mine = 0;
    for (int c = 0; c < XCCL_NCOLL; c++) {
        for (int k = 0; k < CLASSES; k++) {
            for (int w = 0; w < WAYS; w++) {
                mine += 0 != kept[c][k][w] && !(kept[c][k][w] >> 8 & 1);
            }
        }
    }
    if (0 == mine) {
        return 0;
    }
    /* A bad file is replaced: its picks were not used either. */
    line_t *lines;
    int n;
    char ignored[8];
    if (0 != read_lines(path, since, &lines, &n, ignored, sizeof(ignored))) {
        n = 0;
    }
    char *tmp = NULL;
    if (0 != make_dirs(path) || asprintf(&tmp, "%s.%ld.tmp", path, (long) getpid()) < 0) {
        snprintf(err, errlen, "cannot create its directory (%s)", strerror(errno));
        free(lines);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    int rc = NULL == f ? -1 : 0, written = 0;
    if (0 == rc) {
        rc = fprintf(f, "# xccl's shared-memory level trial picks (coll_xccl_picks_file): "
                     "<collective> <size class> <ranks> <ranks on the node> quiet|noisy "
                     "<algorithm> <unix time>\n") < 0 ? -1 : 0;
    }
    for (int i = 0; 0 == rc && i < n; i++) {
        if (!own(lines[i].coll, lines[i].k, lines[i].key)) {
            rc = write_line(f, lines[i].coll, lines[i].k, lines[i].key, lines[i].pick, lines[i].when);
            written++;
        }
    }
    for (int c = 0; 0 == rc && c < XCCL_NCOLL; c++) {
        for (int k = 0; 0 == rc && k < CLASSES; k++) {
            for (int w = 0; 0 == rc && w < WAYS; w++) {
                const uint64_t e = kept[c][k][w];
                if (0 != e && !(e >> 8 & 1)) {
                    rc = write_line(f, c, k, e >> 9, (int) (e & 0xff), (long long) now);
                    written++;
                }
            }
        }
    }
    if (NULL != f && 0 != fclose(f)) {
        rc = -1;
    }
    if (0 == rc && 0 != rename(tmp, path)) {
        rc = -1;
    }
    if (0 != rc) {
        snprintf(err, errlen, "cannot write it (%s)", strerror(errno));
        (void) unlink(tmp);
    }
    free(tmp);
    free(lines);
    return 0 == rc ? written : -1;
}

/* The oldest time a line may have (0: any). */
static time_t picks_since(time_t now)
{
    const int days = mca_coll_xccl_component.picks_days;
    return days > 0 && now > (time_t) days * 86400 ? now - (time_t) days * 86400 : 0;
}

void mca_coll_xccl_picks_open(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    char err[160];
    xccl_picks_clear();
    free(c->picks_path);
    c->picks_path = xccl_picks_path(c->picks_file);
    if (NULL == c->picks_path) {
        return;
    }
    const int n = xccl_picks_load(c->picks_path, picks_since(time(NULL)), err, sizeof(err));
    if (n < 0) {
        mca_coll_xccl_log(0, "coll_xccl_picks_file %s: %s; its picks are not used (the level's "
                          "trials run, and rewrite it)", c->picks_path, err);
    } else {
        mca_coll_xccl_log(2, "init: %d trial picks from coll_xccl_picks_file %s", n, c->picks_path);
    }
}

void mca_coll_xccl_picks_close(void)
{
    mca_coll_xccl_component_t *c = &mca_coll_xccl_component;
    char err[160];
    if (NULL != c->picks_path) {
        const time_t now = time(NULL);
        const int n = xccl_picks_save(c->picks_path, picks_since(now), now, err, sizeof(err));
        if (n < 0) {
            mca_coll_xccl_log(1, "coll_xccl_picks_file %s: %s; this process's trial picks are "
                              "not kept", c->picks_path, err);
        } else if (n > 0) {
            mca_coll_xccl_log(2, "close: %d trial picks written to coll_xccl_picks_file %s", n,
                              c->picks_path);
        }
    }
    free(c->picks_path);
    c->picks_path = NULL;
}
