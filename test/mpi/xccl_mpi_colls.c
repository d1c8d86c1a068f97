/*
 * xccl_mpi_colls: MPI_Reduce, MPI_Barrier, MPI_Allgatherv, MPI_Alltoallv,
 * MPI_Gather, MPI_Gatherv, MPI_Scatter, MPI_Scatterv and their nonblocking
 * forms, every result compared with a reference computed here.
 *
 * usage: xccl_mpi_colls [-q] [-c coll,coll,...] [-a | -V | --stock-ialltoallv-inplace]
 *                       [--skip-ialltoallv-inplace]
 *
 *   (none)  every collective, blocking and nonblocking: every root, sizes
 *           from 0 and 1 element to past 64 KiB and 4 MiB per rank, MPI_INT,
 *           MPI_DOUBLE, MPI_CHAR / MPI_UINT8_T, for reduce every predefined
 *           op on the types it takes (MAXLOC / MINLOC on MPI_DOUBLE_INT and
 *           MPI_2INT); MPI_IN_PLACE wherever the standard allows it; the
 *           insignificant buffers and count arrays NULL; the v forms with
 *           uneven counts (zeros among them, one rank with everything),
 *           blocks in another order than the ranks with gaps between them,
 *           a contiguous and a vector datatype with gaps (the sender
 *           describing the same data as plain MPI_INT on some calls); the
 *           late rank of a barrier; several nonblocking calls of every kind
 *           in flight at once, completed in reverse order; all of it again
 *           on a dup of MPI_COMM_WORLD and on an odd/even split in reverse
 *           rank order, and on two threads at once (MPI_THREAD_MULTIPLE),
 *           each on its own communicator.
 *   -q      fewer types, sizes and ops (the runs that force algorithms).
 *   -c LIST only these collectives (reduce, barrier, allgatherv, alltoallv,
 *           gather, gatherv, scatter, scatterv).
 *   -a      only MPI_Ialltoallv with MPI_IN_PLACE on uneven blocks of about
 *           1000 MPI_INTs with zeros among them (Open MPI 4.1.4's libnbc
 *           takes blocks from the wrong peer there at np 4), checked like
 *           everything else.
 *   -V      only calls that xccl carries (predefined contiguous types,
 *           nonzero totals, MPI_COMM_WORLD); every rank prints
 *           "CALLS rank=<r> reduce=<n> ireduce=<n> ... iscatterv=<n>".
 *   --stock-ialltoallv-inplace
 *           the -a calls, but a wrong result is what is expected (of stock
 *           Open MPI 4.1.4, run with xccl excluded): prints
 *           "stock ialltoallv in place: wrong ..." and passes when some
 *           element is wrong; fails when every element is right.
 *   --skip-ialltoallv-inplace
 *           leaves out every nonblocking in-place alltoallv: for runs by
 *           hand against stock Open MPI 4.1 (the test list never passes it).
 *
 * Values carry an iteration counter, so each call's data differs from the
 * one before; receive buffers are filled with guard bytes around and
 * between the blocks, which must be unchanged afterwards; send buffers
 * must be unchanged too, and are overwritten as soon as a call returns or
 * completes.  The reductions use small integers, exact in any order.
 *
 * The first wrong value ends the job: "FAIL rank=<r> ... coll=<c> root=<r>
 * count=<n> ...: <buffer> <which element>: got <x>, want <y>" and
 * MPI_Abort.  At the end rank 0 prints "RESULT: <n> passed, 0 failed".
 */
#include <mpi.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { C_REDUCE, C_BARRIER, C_ALLGATHERV, C_ALLTOALLV, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, NCOLL };
static const char *const coll_name[NCOLL] = {
    "reduce", "barrier", "allgatherv", "alltoallv", "gather", "gatherv", "scatter", "scatterv",
};

/* How much a sweep covers. */
enum { L_TINY, L_QUICK, L_FULL };

/* ---------------------------------------------------------------- types */

typedef enum { K_INT, K_DOUBLE, K_CHAR, K_UINT8, K_DOUBLE_INT, K_2INT } kind_t;
typedef struct { double v; int i; } dint_t;
typedef struct { int v; int i; } iint_t;
static const size_t kind_size[] = { sizeof(int), sizeof(double), 1, 1, sizeof(dint_t), sizeof(iint_t) };

/* A datatype as the test lays it out: nfill basic elements of kind at
 * off[] inside an extent of ext basic elements. */
typedef struct {
    const char *name;
    kind_t kind;
    MPI_Datatype type;
    int ext;
    int nfill;
    int off[4];
    int basic;      /* the type that describes the same data as plain elements */
} type_t;

enum { T_INT, T_DOUBLE, T_CHAR, T_UINT8, T_CONTIG3, T_VEC, T_DOUBLE_INT, T_2INT, NTYPE };
static type_t types[NTYPE];

static void types_init(void)
{
    types[T_INT] = (type_t) { "MPI_INT", K_INT, MPI_INT, 1, 1, { 0 }, T_INT };
    types[T_DOUBLE] = (type_t) { "MPI_DOUBLE", K_DOUBLE, MPI_DOUBLE, 1, 1, { 0 }, T_DOUBLE };
    types[T_CHAR] = (type_t) { "MPI_CHAR", K_CHAR, MPI_CHAR, 1, 1, { 0 }, T_CHAR };
    types[T_UINT8] = (type_t) { "MPI_UINT8_T", K_UINT8, MPI_UINT8_T, 1, 1, { 0 }, T_UINT8 };
    types[T_DOUBLE_INT] = (type_t) { "MPI_DOUBLE_INT", K_DOUBLE_INT, MPI_DOUBLE_INT, 1, 1, { 0 }, T_DOUBLE_INT };
    types[T_2INT] = (type_t) { "MPI_2INT", K_2INT, MPI_2INT, 1, 1, { 0 }, T_2INT };
    MPI_Datatype c3, v, vr;
    MPI_Type_contiguous(3, MPI_INT, &c3);
    MPI_Type_commit(&c3);
    types[T_CONTIG3] = (type_t) { "contiguous(3,MPI_INT)", K_INT, c3, 3, 3, { 0, 1, 2 }, T_INT };
    /* ints 0 1 _ 3 4 _: gaps inside each element */
    MPI_Type_vector(2, 2, 3, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, 6 * (MPI_Aint) sizeof(int), &vr);
    MPI_Type_commit(&vr);
    MPI_Type_free(&v);
    types[T_VEC] = (type_t) { "vector(2,2,3,MPI_INT)/extent 6", K_INT, vr, 6, 4, { 0, 1, 3, 4 }, T_INT };
}

static void types_free(void)
{
    MPI_Type_free(&types[T_CONTIG3].type);
    MPI_Type_free(&types[T_VEC].type);
}

/* ------------------------------------------------------------------ ops */

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_LAND, O_BAND, O_LOR, O_BOR, O_LXOR, O_BXOR, O_MAXLOC, O_MINLOC, NOP };
static const char *const op_name[NOP] = {
    "MPI_SUM", "MPI_PROD", "MPI_MAX", "MPI_MIN", "MPI_LAND", "MPI_BAND",
    "MPI_LOR", "MPI_BOR", "MPI_LXOR", "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC",
};

static MPI_Op op_handle(int o)
{
    switch (o) {
    case O_SUM: return MPI_SUM;
    case O_PROD: return MPI_PROD;
    case O_MAX: return MPI_MAX;
    case O_MIN: return MPI_MIN;
    case O_LAND: return MPI_LAND;
    case O_BAND: return MPI_BAND;
    case O_LOR: return MPI_LOR;
    case O_BOR: return MPI_BOR;
    case O_LXOR: return MPI_LXOR;
    case O_BXOR: return MPI_BXOR;
    case O_MAXLOC: return MPI_MAXLOC;
    default: return MPI_MINLOC;
    }
}

/* The types op takes here, into t; returns how many. */
static int op_types(int o, int *t)
{
    if (o <= O_MIN) {
        t[0] = T_INT, t[1] = T_DOUBLE, t[2] = T_UINT8;
        return 3;
    }
    if (o <= O_BXOR) {
        t[0] = T_INT, t[1] = T_UINT8;
        return 2;
    }
    t[0] = T_DOUBLE_INT, t[1] = T_2INT;
    return 2;
}

/* ---------------------------------------------------------- the options */

static int opt_quick, opt_only_a2av, opt_carried, opt_stock, opt_skip_a2av_inplace;
static int coll_on[NCOLL];
static int world_rank, world_size;

/* ------------------------------------------------------------- buffers */

#define GUARD 16            /* basic elements of guard before and after a buffer */
#define GUARD_BYTE 0xEE     /* never a byte of a value's int / double / char form */
#define SCRIBBLE 0xCC       /* what a send buffer holds once the call is done */

typedef struct {
    unsigned char *mem;
    size_t cap;
    unsigned char *data;    /* what the call gets: mem + GUARD elements */
    size_t n;               /* basic elements between the guards */
    size_t esz;
} gbuf_t;

/* Sets b up for n basic elements of esz bytes, guard bytes everywhere;
 * the memory of the call before is reused. */
static unsigned char *gbuf_init(gbuf_t *b, size_t n, size_t esz)
{
    size_t bytes = (n + 2 * GUARD) * esz;
    if (bytes > b->cap) {
        free(b->mem);
        b->mem = malloc(bytes);
        if (!b->mem) {
            fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", world_rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        b->cap = bytes;
    }
    memset(b->mem, GUARD_BYTE, bytes);
    b->data = b->mem + GUARD * esz;
    b->n = n;
    b->esz = esz;
    return b->data;
}

/* ------------------------------------------------------------- layouts */

/* Blocks of one buffer: block b holds counts[b] elements of t from
 * displacement displs[b] (in extents of t), data of rank src[b] for rank
 * dst[b].  src -1: the reduction's result. */
typedef struct {
    const type_t *t;
    int nblk;
    int *counts, *displs, *src, *dst;
} layout_t;

/* The j-th basic element a block carries. */
static uint32_t mval(int src, int dst, size_t seq, unsigned it)
{
    return (uint32_t) src * 1000003u + (uint32_t) dst * 7919u + (uint32_t) seq * 31u + it * 101u + 1u;
}

static void put(kind_t k, unsigned char *buf, size_t idx, uint32_t v)
{
    switch (k) {
    case K_INT: {
        int x = (int) (v & 0x3fffffff);
        memcpy(buf + idx * sizeof(int), &x, sizeof(x));
        break;
    }
    case K_DOUBLE: {
        double x = (double) v;
        memcpy(buf + idx * sizeof(double), &x, sizeof(x));
        break;
    }
    case K_CHAR: buf[idx] = (unsigned char) (v % 100); break;
    case K_UINT8: buf[idx] = (unsigned char) (v % 200); break;
    default: abort();
    }
}

/* Writes block only (or every block: only -1) of L into buf. */
static void layout_fill(const layout_t *L, unsigned char *buf, unsigned it, int only)
{
    const type_t *t = L->t;
    for (int b = 0; b < L->nblk; b++) {
        if (only >= 0 && b != only) {
            continue;
        }
        for (size_t e = 0; e < (size_t) L->counts[b]; e++) {
            size_t at = ((size_t) L->displs[b] + e) * (size_t) t->ext;
            for (int j = 0; j < t->nfill; j++) {
                put(t->kind, buf, at + (size_t) t->off[j],
                    mval(L->src[b], L->dst[b], e * (size_t) t->nfill + (size_t) j, it));
            }
        }
    }
}

/* Basic elements from the buffer's start to the end of its last block. */
static size_t layout_span(const layout_t *L)
{
    size_t m = 0;
    for (int b = 0; b < L->nblk; b++) {
        size_t end = ((size_t) L->displs[b] + (size_t) L->counts[b]) * (size_t) L->t->ext;
        if (L->counts[b] > 0 && end > m) {
            m = end;
        }
    }
    return m;
}

/* Count patterns of the v forms. */
enum { P_EVEN, P_UNEVEN, P_ONE, P_SYM, NPAT };
static const char *const pat_name[NPAT] = { "even", "uneven", "one_rank", "uneven_sym" };

/* Elements rank i contributes (allgatherv, gatherv, scatterv): uneven with
 * zeros, or everything on rank hub. */
static int vcount(int pat, size_t base, int i, int hub)
{
    switch (pat) {
    case P_EVEN: return (int) base;
    case P_ONE: return i == hub ? (int) (2 * base) : 0;
    default: return i % 3 == 1 ? 0 : (int) (base + (size_t) i * 7 % (base / 4 + 1));
    }
}

/* Elements s sends to d (alltoallv); P_SYM, P_ONE and P_EVEN are
 * symmetric, as MPI_IN_PLACE needs. */
static int a2a_count(int pat, size_t base, int s, int d, int hub)
{
    switch (pat) {
    case P_EVEN: return (int) base;
    case P_ONE: return s == hub || d == hub ? (int) base : 0;
    case P_SYM: return (s + d) % 3 == 0 ? 0 : (int) (base + (size_t) ((s + d) * 7 + s * d) % (base / 4 + 1));
    default: return (s + 2 * d) % 3 == 1 ? 0 : (int) (base + (size_t) (s * 7 + d * 3) % (base / 4 + 1));
    }
}

/* Displacements of n blocks: in rank order without gaps (permuted 0), or
 * in another order (reversed, rotated by salt) with gaps of one or two
 * extents before each block. */
static void place(int n, const int *counts, int permuted, int salt, int *displs)
{
    int at = 0;
    for (int q = 0; q < n; q++) {
        int b = permuted ? (n - 1 - q + salt) % n : q;
        if (permuted) {
            at += 1 + q % 2;
        }
        displs[b] = at;
        at += counts[b];
    }
}

/* --------------------------------------------------------------- calls */

typedef struct call call_t;

typedef struct {
    MPI_Comm comm;
    const char *name;
    int rank, size;
    unsigned it;            /* stamps each call's values */
    unsigned k;             /* picks roots and variants in turn */
    int fatal;              /* a wrong value ends the job (else counted) */
    long wrong, checks;
    long ncalls[NCOLL][2];  /* calls made, [coll][nonblocking] */
    call_t *calls[NCOLL];   /* buffers reused from call to call */
    call_t *extra;          /* a blocking call among nonblocking ones */
} ctx_t;

struct call {
    ctx_t *x;
    int coll, nb, root, inplace, pat, permuted, op;
    const type_t *rt, *st;  /* what the receiver and the sender name */
    size_t count;           /* per rank (the v forms: the base of the pattern) */
    unsigned it;
    layout_t send, recv;
    int has_send, has_recv; /* whether this rank's buffer is significant */
    int scount, rcount;
    const void *sarg;
    void *rarg;
    int *sca, *sda, *rca, *rda;  /* count and displacement arrays as passed (or NULL) */
    int *arr;               /* 8 arrays of size ints */
    gbuf_t sbuf, rbuf, simg, rimg;
    MPI_Request req;
};

static call_t *call_new(ctx_t *x)
{
    call_t *c = calloc(1, sizeof(*c));
    int p = x->size;
    c->x = x;
    c->arr = calloc(8 * (size_t) p, sizeof(int));
    if (!c || !c->arr) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    c->send = (layout_t) { NULL, 0, c->arr, c->arr + p, c->arr + 2 * p, c->arr + 3 * p };
    c->recv = (layout_t) { NULL, 0, c->arr + 4 * p, c->arr + 5 * p, c->arr + 6 * p, c->arr + 7 * p };
    return c;
}

static void call_free(call_t *c)
{
    free(c->sbuf.mem);
    free(c->rbuf.mem);
    free(c->simg.mem);
    free(c->rimg.mem);
    free(c->arr);
    free(c);
}

static const char *op_str(const call_t *c)
{
    return C_REDUCE == c->coll ? op_name[c->op] : "-";
}

static void fmt_val(kind_t k, const unsigned char *p, char *out, size_t len)
{
    switch (k) {
    case K_INT: { int x; memcpy(&x, p, sizeof(x)); snprintf(out, len, "%d", x); break; }
    case K_DOUBLE: { double x; memcpy(&x, p, sizeof(x)); snprintf(out, len, "%.17g", x); break; }
    case K_CHAR: case K_UINT8: snprintf(out, len, "%u", (unsigned) p[0]); break;
    case K_DOUBLE_INT: { dint_t x; memcpy(&x, p, sizeof(x)); snprintf(out, len, "(%.17g, %d)", x.v, x.i); break; }
    case K_2INT: { iint_t x; memcpy(&x, p, sizeof(x)); snprintf(out, len, "(%d, %d)", x.v, x.i); break; }
    }
}

/* Which element of L basic element idx (from the buffer's start; negative:
 * the guard before it) is. */
static void describe(const layout_t *L, ptrdiff_t idx, size_t n, char *out, size_t len)
{
    const type_t *t = L->t;
    if (idx < 0) {
        snprintf(out, len, "guard before the buffer, basic element %td", idx);
        return;
    }
    if ((size_t) idx >= n) {
        snprintf(out, len, "guard after the buffer, basic element %td (buffer %zu)", idx, n);
        return;
    }
    for (int b = 0; b < L->nblk; b++) {
        ptrdiff_t lo = (ptrdiff_t) L->displs[b] * t->ext, hi = lo + (ptrdiff_t) L->counts[b] * t->ext;
        if (idx >= lo && idx < hi) {
            ptrdiff_t e = (idx - lo) / t->ext, in = (idx - lo) % t->ext;
            int j = -1;
            for (int f = 0; f < t->nfill; f++) {
                if (t->off[f] == in) {
                    j = f;
                }
            }
            char who[64];
            if (L->src[b] < 0) {
                snprintf(who, sizeof(who), "the result");
            } else {
                snprintf(who, sizeof(who), "block %d (from rank %d for rank %d)", b, L->src[b], L->dst[b]);
            }
            if (j < 0) {
                snprintf(out, len, "%s, gap inside element %td (basic element %td)", who, e, idx);
            } else if (t->nfill > 1) {
                snprintf(out, len, "%s, element %td part %d (basic element %td)", who, e, j, idx);
            } else {
                snprintf(out, len, "%s, element %td", who, e);
            }
            return;
        }
    }
    snprintf(out, len, "gap between blocks, basic element %td", idx);
}

/* For an int or double a block carried: whose data it is (a block from
 * the wrong peer shows as such), appended to out. */
static void decode(const call_t *c, kind_t k, const unsigned char *p, char *out, size_t len)
{
    uint32_t got;
    if (K_INT == k) {
        int v;
        memcpy(&v, p, sizeof(v));
        got = (uint32_t) v;
    } else if (K_DOUBLE == k) {
        double v;
        memcpy(&v, p, sizeof(v));
        if (v < 0 || v > 4294967295.0 || v != (double) (uint32_t) v) {
            return;
        }
        got = (uint32_t) v;
    } else {
        return;
    }
    for (unsigned it = c->it; it + 2 >= c->it && it > 0; it--) {
        for (int s = 0; s < c->x->size; s++) {
            for (int d = 0; d < c->x->size; d++) {
                uint32_t base = mval(s, d, 0, it), mask = K_INT == k ? 0x3fffffffu : 0xffffffffu;
                uint32_t diff = (got - base) & mask;
                if (diff % 31 == 0 && diff / 31 < 8 * c->count + 8) {
                    size_t l = strlen(out);
                    snprintf(out + l, len - l, " (element %u of the data from rank %d for rank %d%s)", diff / 31,
                             s, d, it == c->it ? "" : " of an earlier call");
                    return;
                }
            }
        }
    }
}

static int elem_eq(kind_t k, const unsigned char *a, const unsigned char *b)
{
    if (K_DOUBLE_INT == k) {
        dint_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return 0 == memcmp(&x.v, &y.v, sizeof(x.v)) && x.i == y.i;   /* not the padding */
    }
    if (K_2INT == k) {
        iint_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x.v == y.v && x.i == y.i;
    }
    return 0 == memcmp(a, b, kind_size[k]);
}

static void report(call_t *c, const char *what, const char *where, const char *got, const char *want)
{
    ctx_t *x = c->x;
    char type[96];
    if (c->st != c->rt) {
        snprintf(type, sizeof(type), "%s (sent as %s)", c->rt->name, c->st->name);
    } else {
        snprintf(type, sizeof(type), "%s", c->rt->name);
    }
    printf("%s rank=%d world_rank=%d comm=%s coll=%s%s root=%d count=%zu type=%s op=%s "
           "pattern=%s%s inplace=%d it=%u: %s %s: got %s, want %s\n",
           x->fatal ? "FAIL" : "WRONG", x->rank, world_rank, x->name, c->nb ? "i" : "",
           coll_name[c->coll], c->root, c->count, type, op_str(c), pat_name[c->pat],
           c->permuted ? "/permuted" : "", c->inplace, c->it, what, where, got, want);
    fflush(stdout);
    x->wrong++;
    if (x->fatal) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Compares buffer got with image want, guards included, element by
 * element of kind; reports the first difference. */
static void compare(call_t *c, const char *what, const gbuf_t *got, const gbuf_t *want, const layout_t *L,
                    kind_t kind)
{
    size_t esz = got->esz, total = got->n + 2 * GUARD;
    const unsigned char *g = got->data - GUARD * esz, *w = want->data - GUARD * esz;
    c->x->checks++;
    if (K_DOUBLE_INT != kind && K_2INT != kind && 0 == memcmp(g, w, total * esz)) {
        return;
    }
    for (size_t e = 0; e < total; e++) {
        if (!elem_eq(kind, g + e * esz, w + e * esz)) {
            char where[192], gs[160], ws[64];
            describe(L, (ptrdiff_t) e - GUARD, got->n, where, sizeof(where));
            fmt_val(kind, g + e * esz, gs, sizeof(gs));
            if (C_REDUCE != c->coll) {
                decode(c, kind, g + e * esz, gs, sizeof(gs));
            }
            fmt_val(kind, w + e * esz, ws, sizeof(ws));
            report(c, what, where, gs, ws);
            return;
        }
    }
}

/* --------------------------------------------------------- reductions */

/* Rank r's input element i of op (loc: MAXLOC / MINLOC's index).  Small
 * integers: sums and products stay exact and in range in any order. */
static long long rin(int op, kind_t k, int r, size_t i, unsigned it, int p, int *loc)
{
    int sgn = K_UINT8 != k;
    size_t ur = (size_t) r, ui = i + it;
    switch (op) {
    case O_SUM: return (long long) ((i * 7 + ur * 13 + (size_t) it * 3) % 23) - (sgn ? 11 : 0);
    case O_PROD: {
        long long v = (i * 3 + ur + it) % 4 == 0 ? 2 : 1;
        return sgn && (i + ur * 5 + it) % 5 == 0 ? -v : v;
    }
    case O_MAX: case O_MIN: return (long long) ((i * 11 + ur * 29 + (size_t) it * 5) % 97) - (sgn ? 48 : 0);
    case O_LAND: case O_LOR: case O_LXOR: return (i * 5 + ur * 7 + it) % 4 == 0 ? 0 : 1 + (long long) ((i + ur) % 5);
    case O_BAND: return (K_UINT8 == k ? 0xff : 0x7fffffff) ^ (1LL << ((ui + ur) % (K_UINT8 == k ? 8 : 31)));
    case O_BOR: return 1LL << ((i * 3 + ur + it) % (K_UINT8 == k ? 8 : 31));
    case O_BXOR: {
        uint32_t h = (uint32_t) (i * 2654435761u) ^ (uint32_t) (ur * 40503u + (size_t) it * 97u);
        h *= 2246822519u;
        return (long long) (h & (K_UINT8 == k ? 0xffu : 0x7fffffffu));
    }
    default:
        /* every other element the same value on every rank: the lower
         * index wins, that of a higher rank */
        *loc = (p - 1 - r) * 3 + (int) (i % 3);
        return (i + it) % 2 ? 5 : (long long) ((i * 3 + ur * 5 + it) % 7);
    }
}

static void rput(kind_t k, unsigned char *buf, size_t idx, long long v, int loc)
{
    switch (k) {
    case K_INT: { int x = (int) v; memcpy(buf + idx * sizeof(x), &x, sizeof(x)); break; }
    case K_DOUBLE: { double x = (double) v; memcpy(buf + idx * sizeof(x), &x, sizeof(x)); break; }
    case K_UINT8: buf[idx] = (unsigned char) v; break;
    case K_DOUBLE_INT: { dint_t x = { (double) v, loc }; memcpy(buf + idx * sizeof(x), &x, sizeof(x)); break; }
    case K_2INT: { iint_t x = { (int) v, loc }; memcpy(buf + idx * sizeof(x), &x, sizeof(x)); break; }
    default: abort();
    }
}

/* acc = acc op v, as the standard defines op (MAXLOC / MINLOC: the lower
 * index on a tie). */
static void rfold(int op, kind_t k, long long *acc, int *aloc, long long v, int loc)
{
    switch (op) {
    case O_SUM: *acc += v; break;
    case O_PROD: *acc *= v; break;
    case O_MAX: *acc = v > *acc ? v : *acc; break;
    case O_MIN: *acc = v < *acc ? v : *acc; break;
    case O_LAND: *acc = *acc && v; break;
    case O_LOR: *acc = *acc || v; break;
    case O_LXOR: *acc = !*acc != !v; break;
    case O_BAND: *acc &= v; break;
    case O_BOR: *acc |= v; break;
    case O_BXOR: *acc ^= v; break;
    case O_MAXLOC:
    case O_MINLOC:
        if ((O_MAXLOC == op && v > *acc) || (O_MINLOC == op && v < *acc)) {
            *acc = v;
            *aloc = loc;
        } else if (v == *acc && loc < *aloc) {
            *aloc = loc;
        }
        break;
    }
    if (K_UINT8 == k) {
        *acc &= 0xff;
    }
}

static void reduce_input(const call_t *c, unsigned char *buf)
{
    kind_t k = c->rt->kind;
    for (size_t i = 0; i < c->count; i++) {
        int loc = 0;
        long long v = rin(c->op, k, c->x->rank, i, c->it, c->x->size, &loc);
        rput(k, buf, i, v, loc);
    }
}

static void reduce_reference(const call_t *c, unsigned char *buf)
{
    kind_t k = c->rt->kind;
    for (size_t i = 0; i < c->count; i++) {
        int aloc = 0, loc = 0;
        long long acc = rin(c->op, k, 0, i, c->it, c->x->size, &aloc);
        for (int r = 1; r < c->x->size; r++) {
            long long v = rin(c->op, k, r, i, c->it, c->x->size, &loc);
            rfold(c->op, k, &acc, &aloc, v, loc);
        }
        rput(k, buf, i, acc, aloc);
    }
}

/* ------------------------------------------------------ setting a call up */

static void one_block(layout_t *L, const type_t *t, int count, int src, int dst)
{
    L->t = t;
    L->nblk = 1;
    L->counts[0] = count;
    L->displs[0] = 0;
    L->src[0] = src;
    L->dst[0] = dst;
}

/* Blocks counts[] (already set) of L from src[i] = i or from, for dst[i] = i or to. */
static void blocks(layout_t *L, const type_t *t, int n, int from, int to, int permuted, int salt)
{
    L->t = t;
    L->nblk = n;
    for (int i = 0; i < n; i++) {
        L->src[i] = from >= 0 ? from : i;
        L->dst[i] = to >= 0 ? to : i;
    }
    place(n, L->counts, permuted, salt, L->displs);
}

/* Fills the buffers and arguments of c (its parameters set). */
static void call_setup(call_t *c)
{
    ctx_t *x = c->x;
    const int p = x->size, me = x->rank, root = c->root;
    const type_t *rt = c->rt, *st = c->st;
    const int scale = rt && st ? rt->nfill / st->nfill : 1;   /* st elements per rt element */
    const int n = (int) c->count, hub = (root + 1 + (int) c->it) % p;
    layout_t *S = &c->send, *R = &c->recv;
    int own = -1;                                /* in place: the block already in RECV */
    c->has_send = c->has_recv = 0;
    c->sca = c->sda = c->rca = c->rda = NULL;
    c->sarg = NULL;
    c->rarg = NULL;
    c->scount = c->rcount = 0;
    S->nblk = R->nblk = 0;
    S->t = st;
    R->t = rt;
    switch (c->coll) {
    case C_REDUCE: {
        size_t esz = kind_size[rt->kind];
        c->has_send = !(c->inplace && me == root);
        c->has_recv = me == root;
        one_block(S, rt, n, -1, -1);
        one_block(R, rt, n, -1, -1);
        if (c->has_send) {
            c->sarg = gbuf_init(&c->sbuf, (size_t) n, esz);
            reduce_input(c, c->sbuf.data);
            gbuf_init(&c->simg, (size_t) n, esz);
            reduce_input(c, c->simg.data);
        } else {
            c->sarg = MPI_IN_PLACE;
        }
        if (c->has_recv) {
            c->rarg = gbuf_init(&c->rbuf, (size_t) n, esz);
            if (c->inplace) {
                reduce_input(c, c->rbuf.data);
            }
        }
        return;
    }
    case C_BARRIER:
        return;
    case C_GATHER:
        c->scount = n * scale;
        c->rcount = n;
        one_block(S, st, n * scale, me, root);
        c->has_send = !(c->inplace && me == root);
        if (me == root) {
            c->has_recv = 1;
            for (int i = 0; i < p; i++) {
                R->counts[i] = n;
            }
            blocks(R, rt, p, -1, root, 0, 0);
            own = c->inplace ? root : -1;
        }
        break;
    case C_SCATTER:
        c->scount = n * scale;
        c->rcount = n;
        if (me == root) {
            c->has_send = 1;
            for (int i = 0; i < p; i++) {
                S->counts[i] = n * scale;
            }
            blocks(S, st, p, root, -1, 0, 0);
        }
        c->has_recv = !(c->inplace && me == root);
        one_block(R, rt, n, root, me);
        break;
    case C_GATHERV:
        c->scount = vcount(c->pat, c->count, me, hub) * scale;
        one_block(S, st, c->scount, me, root);
        c->has_send = !(c->inplace && me == root);
        if (me == root) {
            c->has_recv = 1;
            for (int i = 0; i < p; i++) {
                R->counts[i] = vcount(c->pat, c->count, i, hub);
            }
            blocks(R, rt, p, -1, root, c->permuted, (int) c->it);
            c->rca = R->counts;
            c->rda = R->displs;
            own = c->inplace ? root : -1;
        }
        break;
    case C_SCATTERV:
        c->rcount = vcount(c->pat, c->count, me, hub);
        if (me == root) {
            c->has_send = 1;
            for (int i = 0; i < p; i++) {
                S->counts[i] = vcount(c->pat, c->count, i, hub) * scale;
            }
            blocks(S, st, p, root, -1, c->permuted, (int) c->it);
            c->sca = S->counts;
            c->sda = S->displs;
        }
        c->has_recv = !(c->inplace && me == root);
        one_block(R, rt, c->rcount, root, me);
        break;
    case C_ALLGATHERV:
        c->scount = vcount(c->pat, c->count, me, hub) * scale;
        one_block(S, st, c->scount, me, 0);
        c->has_send = !c->inplace;
        c->has_recv = 1;
        for (int i = 0; i < p; i++) {
            R->counts[i] = vcount(c->pat, c->count, i, hub);
        }
        blocks(R, rt, p, -1, 0, c->permuted, (int) c->it);
        c->rca = R->counts;
        c->rda = R->displs;
        own = c->inplace ? me : -1;
        break;
    case C_ALLTOALLV:
        for (int j = 0; j < p; j++) {
            S->counts[j] = a2a_count(c->pat, c->count, me, j, hub) * scale;
            R->counts[j] = a2a_count(c->pat, c->count, j, me, hub);
        }
        blocks(S, st, p, me, -1, c->permuted, 1);
        blocks(R, rt, p, -1, me, c->permuted, 2 + (int) c->it);
        c->has_send = !c->inplace;
        c->has_recv = 1;
        c->sca = S->counts;
        c->sda = S->displs;
        c->rca = R->counts;
        c->rda = R->displs;
        if (c->inplace) {
            /* ignored with MPI_IN_PLACE: the receive side's arrays */
            c->sca = R->counts;
            c->sda = R->displs;
        }
        break;
    }

    size_t sesz = kind_size[st->kind], resz = kind_size[rt->kind];
    if (c->has_send) {
        size_t span = layout_span(S);
        c->sarg = gbuf_init(&c->sbuf, span, sesz);
        layout_fill(S, c->sbuf.data, c->it, -1);
        gbuf_init(&c->simg, span, sesz);
        layout_fill(S, c->simg.data, c->it, -1);
    } else if (c->inplace && (me == root || C_ALLGATHERV == c->coll || C_ALLTOALLV == c->coll) &&
               C_SCATTER != c->coll && C_SCATTERV != c->coll) {
        c->sarg = MPI_IN_PLACE;
    }
    if (c->has_recv) {
        c->rarg = gbuf_init(&c->rbuf, layout_span(R), resz);
        if (own >= 0) {
            layout_fill(R, c->rbuf.data, c->it, own);
        } else if (C_ALLTOALLV == c->coll && c->inplace) {
            /* what this rank sends, in the blocks it receives into */
            int src[64], *keep = R->src, *keepd = R->dst;
            int dst[64];
            if (p > 64) {
                abort();
            }
            for (int j = 0; j < p; j++) {
                src[j] = me;
                dst[j] = j;
            }
            R->src = src;
            R->dst = dst;
            layout_fill(R, c->rbuf.data, c->it, -1);
            R->src = keep;
            R->dst = keepd;
        }
    } else if (c->inplace && me == root && (C_SCATTER == c->coll || C_SCATTERV == c->coll)) {
        c->rarg = MPI_IN_PLACE;
    }
}

static void call_error(call_t *c, const char *fn, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    printf("FAIL rank=%d world_rank=%d comm=%s coll=%s%s root=%d count=%zu type=%s%s%s op=%s pattern=%s%s "
           "inplace=%d it=%u: %s returned %s\n",
           c->x->rank, world_rank, c->x->name, c->nb ? "i" : "", coll_name[c->coll], c->root, c->count,
           c->rt ? c->rt->name : "-", c->st != c->rt ? " sent as " : "", c->st != c->rt ? c->st->name : "",
           op_str(c), pat_name[c->pat], c->permuted ? "/permuted" : "", c->inplace, c->it, fn, s);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void call_issue(call_t *c)
{
    MPI_Comm comm = c->x->comm;
    MPI_Request *q = &c->req;
    MPI_Datatype stype = c->st ? c->st->type : MPI_DATATYPE_NULL;
    MPI_Datatype rtype = c->rt ? c->rt->type : MPI_DATATYPE_NULL;
    int rc = MPI_SUCCESS, nb = c->nb, n = (int) c->count;
    c->x->ncalls[c->coll][nb]++;
    c->req = MPI_REQUEST_NULL;
    switch (c->coll) {
    case C_REDUCE:
        rc = nb ? MPI_Ireduce(c->sarg, c->rarg, n, rtype, op_handle(c->op), c->root, comm, q)
                : MPI_Reduce(c->sarg, c->rarg, n, rtype, op_handle(c->op), c->root, comm);
        break;
    case C_BARRIER:
        rc = nb ? MPI_Ibarrier(comm, q) : MPI_Barrier(comm);
        break;
    case C_GATHER:
        rc = nb ? MPI_Igather(c->sarg, c->scount, stype, c->rarg, c->rcount, rtype, c->root, comm, q)
                : MPI_Gather(c->sarg, c->scount, stype, c->rarg, c->rcount, rtype, c->root, comm);
        break;
    case C_SCATTER:
        rc = nb ? MPI_Iscatter(c->sarg, c->scount, stype, c->rarg, c->rcount, rtype, c->root, comm, q)
                : MPI_Scatter(c->sarg, c->scount, stype, c->rarg, c->rcount, rtype, c->root, comm);
        break;
    case C_GATHERV:
        rc = nb ? MPI_Igatherv(c->sarg, c->scount, stype, c->rarg, c->rca, c->rda, rtype, c->root, comm, q)
                : MPI_Gatherv(c->sarg, c->scount, stype, c->rarg, c->rca, c->rda, rtype, c->root, comm);
        break;
    case C_SCATTERV:
        rc = nb ? MPI_Iscatterv(c->sarg, c->sca, c->sda, stype, c->rarg, c->rcount, rtype, c->root, comm, q)
                : MPI_Scatterv(c->sarg, c->sca, c->sda, stype, c->rarg, c->rcount, rtype, c->root, comm);
        break;
    case C_ALLGATHERV:
        rc = nb ? MPI_Iallgatherv(c->sarg, c->scount, stype, c->rarg, c->rca, c->rda, rtype, comm, q)
                : MPI_Allgatherv(c->sarg, c->scount, stype, c->rarg, c->rca, c->rda, rtype, comm);
        break;
    case C_ALLTOALLV:
        rc = nb ? MPI_Ialltoallv(c->sarg, c->sca, c->sda, stype, c->rarg, c->rca, c->rda, rtype, comm, q)
                : MPI_Alltoallv(c->sarg, c->sca, c->sda, stype, c->rarg, c->rca, c->rda, rtype, comm);
        break;
    }
    if (MPI_SUCCESS != rc) {
        call_error(c, "the call", rc);
    }
}

/* The call is complete: its send buffer unchanged, then overwritten at
 * once (the caller may reuse it), then the receive buffer against the
 * reference. */
static void call_done(call_t *c)
{
    kind_t sk = c->st ? c->st->kind : K_INT, rk = c->rt ? c->rt->kind : K_INT;
    if (C_BARRIER == c->coll) {
        return;
    }
    if (c->has_send) {
        compare(c, "sendbuf (must stay unchanged)", &c->sbuf, &c->simg, &c->send, sk);
        memset(c->sbuf.data, SCRIBBLE, c->sbuf.n * c->sbuf.esz);
    }
    if (c->has_recv) {
        gbuf_init(&c->rimg, c->rbuf.n, c->rbuf.esz);
        if (C_REDUCE == c->coll) {
            reduce_reference(c, c->rimg.data);
        } else {
            layout_fill(&c->recv, c->rimg.data, c->it, -1);
        }
        compare(c, "recvbuf", &c->rbuf, &c->rimg, &c->recv, rk);
    }
}

static void call_wait(call_t *c)
{
    int rc = MPI_Wait(&c->req, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != rc) {
        call_error(c, "MPI_Wait", rc);
    }
}

/* One call on c's buffers, start to check. */
static void run_on(call_t *c, int coll, int nb, int root, int inplace, int pat, int permuted, int op, int rt,
                   int st, size_t count)
{
    ctx_t *x = c->x;
    if (opt_skip_a2av_inplace && C_ALLTOALLV == coll && nb && inplace) {
        return;
    }
    c->coll = coll;
    c->nb = nb;
    c->root = root;
    c->inplace = inplace;
    c->pat = pat;
    c->permuted = permuted;
    c->op = op;
    c->rt = rt >= 0 ? &types[rt] : NULL;
    c->st = st >= 0 ? &types[st] : NULL;
    c->count = count;
    c->it = ++x->it;
    call_setup(c);
    call_issue(c);
    if (nb) {
        call_wait(c);
    }
    call_done(c);
}

static void run(ctx_t *x, int coll, int nb, int root, int inplace, int pat, int permuted, int op, int rt,
                int st, size_t count)
{
    run_on(x->calls[coll], coll, nb, root, inplace, pat, permuted, op, rt, st, count);
}

/* --------------------------------------------------------------- sweeps */

static size_t elems(int t, size_t bytes)
{
    return bytes / (kind_size[types[t].kind] * (size_t) types[t].nfill);
}

/* Counts of type t for a sweep at level lv: 0, 1, 7, ~4 KB, past 64 KiB. */
static int sizes(int lv, int t, size_t *out)
{
    int n = 0;
    if (lv >= L_QUICK) {
        out[n++] = 0;
    }
    out[n++] = 1;
    if (lv == L_FULL) {
        out[n++] = 7;
    }
    out[n++] = 1000;
    if (lv >= L_QUICK) {
        out[n++] = elems(t, 80 * 1024) + 3;
    }
    return n;
}

static int pick_root(ctx_t *x)
{
    return (int) (x->k++ % (unsigned) x->size);
}

static void sweep_reduce(ctx_t *x, int lv)
{
    const int p = x->size;
    for (int op = 0; op < NOP; op++) {
        if (lv == L_TINY && op != O_SUM && op != O_BXOR && op != O_MAXLOC && op != O_LAND) {
            continue;
        }
        int ts[3], nt = op_types(op, ts);
        for (int ti = 0; ti < nt; ti++) {
            /* below FULL: one type per op, in turn */
            if (lv < L_FULL && ti != op % nt) {
                continue;
            }
            size_t sz[8];
            int ns = sizes(lv, ts[ti], sz);
            for (int s = 0; s < ns; s++) {
                for (int nb = 0; nb < 2; nb++) {
                    for (int ip = 0; ip < 2; ip++) {
                        run(x, C_REDUCE, nb, pick_root(x), ip, P_EVEN, 0, op, ts[ti], ts[ti], sz[s]);
                    }
                }
            }
        }
    }
    /* every root */
    for (int root = 0; root < p; root++) {
        for (int nb = 0; nb < 2; nb++) {
            for (int ip = 0; ip < 2; ip++) {
                run(x, C_REDUCE, nb, root, ip, P_EVEN, 0, O_SUM, T_INT, T_INT, 1000);
                if (lv == L_FULL) {
                    run(x, C_REDUCE, nb, root, ip, P_EVEN, 0, O_MAXLOC, T_DOUBLE_INT, T_DOUBLE_INT, 1);
                }
            }
        }
    }
    /* past 1 MiB (where xccl takes a reduce across nodes) */
    if (lv >= L_QUICK) {
        const size_t big = lv == L_FULL ? (size_t) 4 << 20 : ((size_t) 1 << 20) + 4096;
        for (int nb = 0; nb < 2; nb++) {
            run(x, C_REDUCE, nb, pick_root(x), nb, P_EVEN, 0, O_SUM, T_INT, T_INT, elems(T_INT, big));
        }
    }
}

/* gather and scatter */
static void sweep_rooted(ctx_t *x, int coll, int lv)
{
    static const int full[] = { T_INT, T_DOUBLE, T_CHAR, T_CONTIG3 };
    static const int quick[] = { T_INT, T_CHAR };
    const int *ts = lv == L_FULL ? full : quick;
    int nt = lv == L_FULL ? 4 : lv == L_QUICK ? 2 : 1;
    for (int ti = 0; ti < nt; ti++) {
        size_t sz[8];
        int ns = sizes(lv, ts[ti], sz);
        for (int s = 0; s < ns; s++) {
            for (int nb = 0; nb < 2; nb++) {
                for (int ip = 0; ip < 2; ip++) {
                    int st = x->it / 3 % 2 ? types[ts[ti]].basic : ts[ti];
                    run(x, coll, nb, pick_root(x), ip, P_EVEN, 0, 0, ts[ti], st, sz[s]);
                }
            }
        }
    }
    for (int root = 0; root < x->size; root++) {
        for (int nb = 0; nb < 2; nb++) {
            for (int ip = 0; ip < 2; ip++) {
                run(x, coll, nb, root, ip, P_EVEN, 0, 0, T_INT, T_INT, lv == L_TINY ? 1 : 1000);
            }
        }
    }
    if (lv == L_FULL) {
        for (int nb = 0; nb < 2; nb++) {
            run(x, coll, nb, pick_root(x), nb, P_EVEN, 0, 0, T_INT, T_INT, elems(T_INT, 4 << 20));
        }
    }
}

/* gatherv, scatterv, allgatherv, alltoallv */
static void sweep_v(ctx_t *x, int coll, int lv)
{
    static const int full[] = { T_INT, T_DOUBLE, T_CHAR, T_CONTIG3, T_VEC };
    static const int quick[] = { T_INT, T_VEC };
    static const int tiny[] = { T_CONTIG3 };
    const int *ts = lv == L_FULL ? full : lv == L_QUICK ? quick : tiny;
    int nt = lv == L_FULL ? 5 : lv == L_QUICK ? 2 : 1;
    const int rooted = C_GATHERV == coll || C_SCATTERV == coll;
    /* (pattern, permuted): in rank order; uneven with gaps; everything on one rank */
    static const int pats[][2] = { { P_EVEN, 0 }, { P_UNEVEN, 1 }, { P_ONE, 1 }, { P_UNEVEN, 0 } };
    int npat = lv == L_FULL ? 4 : lv == L_QUICK ? 3 : 2;
    for (int ti = 0; ti < nt; ti++) {
        size_t sz[8];
        int ns = sizes(lv, ts[ti], sz);
        for (int s = 0; s < ns; s++) {
            for (int pi = 0; pi < npat; pi++) {
                for (int nb = 0; nb < 2; nb++) {
                    for (int ip = 0; ip < 2; ip++) {
                        int pat = pats[pi][0];
                        /* in place, alltoallv's counts are symmetric */
                        if (C_ALLTOALLV == coll && P_UNEVEN == pat && ip) {
                            pat = P_SYM;
                        }
                        int st = x->it / 3 % 2 ? types[ts[ti]].basic : ts[ti];
                        run(x, coll, nb, rooted ? pick_root(x) : 0, ip, pat, pats[pi][1], 0, ts[ti], st, sz[s]);
                    }
                }
            }
        }
    }
    if (rooted) {
        for (int root = 0; root < x->size; root++) {
            for (int nb = 0; nb < 2; nb++) {
                for (int ip = 0; ip < 2; ip++) {
                    run(x, coll, nb, root, ip, P_UNEVEN, 1, 0, T_INT, T_INT, lv == L_TINY ? 1 : 1000);
                }
            }
        }
    }
    if (lv == L_FULL) {
        size_t per = elems(T_INT, 4 << 20);
        if (C_ALLTOALLV == coll) {
            per /= (size_t) x->size;   /* 4 MiB per rank, all blocks together */
        }
        for (int nb = 0; nb < 2; nb++) {
            run(x, coll, nb, rooted ? pick_root(x) : 0, nb, P_EVEN, nb, 0, T_INT, T_INT, per);
        }
    }
}

/* The clock every process of the host shares (Open MPI's MPI_Wtime counts
 * from each process's own start). */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* Rank late sleeps ms before the barrier; nobody may leave it before the
 * late rank entered. */
static void barrier_late(ctx_t *x, int late, int ms, int nb)
{
    call_t *c = x->calls[C_BARRIER];
    double t_in = 0, t_out = 0, t_late;
    c->coll = C_BARRIER;
    c->nb = nb;
    c->root = late;
    c->count = 0;
    c->rt = c->st = NULL;
    c->it = ++x->it;
    if (x->rank == late) {
        usleep((useconds_t) ms * 1000);
    }
    t_in = now();
    call_issue(c);
    if (nb) {
        int flag = 0;
        while (!flag) {
            int rc = MPI_Test(&c->req, &flag, MPI_STATUS_IGNORE);
            if (MPI_SUCCESS != rc) {
                call_error(c, "MPI_Test", rc);
            }
        }
    }
    t_out = now();
    t_late = t_in;
    MPI_Bcast(&t_late, 1, MPI_DOUBLE, late, x->comm);
    x->checks++;
    if (x->rank != late && t_out < t_late) {
        printf("FAIL rank=%d world_rank=%d comm=%s coll=%sbarrier: left at %.6f s, %.3f ms before rank %d "
               "(asleep %d ms) entered at %.6f s (this rank entered at %.6f s)\n",
               x->rank, world_rank, x->name, nb ? "i" : "", t_out, (t_late - t_out) * 1e3, late, ms, t_late,
               t_in);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void sweep_barrier(ctx_t *x, int lv)
{
    const int p = x->size;
    int big = 0 == strcmp(x->name, "world") ? 200 : 50;
    barrier_late(x, p - 1, big, 0);
    barrier_late(x, p - 1, big, 1);
    if (lv >= L_QUICK) {
        barrier_late(x, 0, big / 2, 1);
        for (int r = 0; r < p; r++) {
            barrier_late(x, r, 10, r % 2);
        }
    }
    for (int i = 0; i < 20; i++) {
        run(x, C_BARRIER, i % 2, 0, 0, 0, 0, 0, -1, -1, 0);
    }
}

/* Nonblocking calls of every kind in flight at once (and a blocking one
 * among them), completed in the reverse order of their start: by one
 * MPI_Waitall or one MPI_Wait after the other. */
static void sweep_mix(ctx_t *x, int lv)
{
    const int p = x->size;
    int rounds = lv == L_FULL ? 6 : lv == L_QUICK ? 3 : 2;
    for (int round = 0; round < rounds; round++) {
        MPI_Request reqs[NCOLL];
        call_t *started[NCOLL];
        int n = 0;
        size_t sz = round % 3 == 0 ? 1 : round % 3 == 1 ? 1000 : elems(T_INT, 80 * 1024) + 3;
        for (int coll = 0; coll < NCOLL; coll++) {
            if (!coll_on[coll]) {
                continue;
            }
            call_t *c = x->calls[coll];
            c->coll = coll;
            c->nb = 1;
            c->root = (round + coll) % p;
            c->inplace = (round + coll) % 2;
            c->pat = (round + coll) % 3 == 0 ? P_EVEN : (round + coll) % 3 == 1 ? P_UNEVEN : P_ONE;
            if (C_ALLTOALLV == coll && c->inplace && P_UNEVEN == c->pat) {
                c->pat = P_SYM;
            }
            if (opt_skip_a2av_inplace && C_ALLTOALLV == coll) {
                c->inplace = 0;
            }
            c->permuted = round % 2;
            c->op = (round * 5 + coll) % NOP;
            int ts[3];
            int nt = op_types(c->op, ts);
            int t = C_REDUCE == coll ? ts[round % nt] : coll == C_GATHER || coll == C_SCATTER ? T_DOUBLE : T_VEC;
            c->rt = C_BARRIER == coll ? NULL : &types[t];
            c->st = C_BARRIER == coll ? NULL : round % 2 ? &types[types[t].basic] : &types[t];
            c->count = C_REDUCE == coll ? sz : elems(t, sz * sizeof(int));
            c->it = ++x->it;
            call_setup(c);
            call_issue(c);
            started[n] = c;
            reqs[n++] = c->req;
            if (n == 3 && coll_on[C_ALLGATHERV]) {
                /* a blocking call while the others are in flight */
                run_on(x->extra, C_ALLGATHERV, 0, 0, 0, P_UNEVEN, 1, 0, T_INT, T_INT, sz);
            }
        }
        if (round % 2 == 0) {
            MPI_Request rev[NCOLL];
            for (int i = 0; i < n; i++) {
                rev[i] = reqs[n - 1 - i];
            }
            int rc = MPI_Waitall(n, rev, MPI_STATUSES_IGNORE);
            if (MPI_SUCCESS != rc) {
                call_error(started[0], "MPI_Waitall", rc);
            }
        } else {
            for (int i = n - 1; i >= 0; i--) {
                started[i]->req = reqs[i];
                call_wait(started[i]);
            }
        }
        for (int i = n - 1; i >= 0; i--) {
            call_done(started[i]);
        }
    }
}

static void sweep(ctx_t *x, int lv)
{
    if (coll_on[C_BARRIER]) {
        sweep_barrier(x, lv);
    }
    if (coll_on[C_REDUCE]) {
        sweep_reduce(x, lv);
    }
    if (coll_on[C_GATHER]) {
        sweep_rooted(x, C_GATHER, lv);
    }
    if (coll_on[C_SCATTER]) {
        sweep_rooted(x, C_SCATTER, lv);
    }
    for (int coll = C_ALLGATHERV; coll <= C_SCATTERV; coll++) {
        if (coll_on[coll] && coll != C_GATHER && coll != C_SCATTER) {
            sweep_v(x, coll, lv);
        }
    }
    sweep_mix(x, lv);
}

/* MPI_Ialltoallv with MPI_IN_PLACE, uneven blocks of about 1000 MPI_INTs
 * with zeros among them, in rank order and permuted, 3 times each. */
static void ialltoallv_inplace(ctx_t *x)
{
    for (int i = 0; i < 3; i++) {
        run(x, C_ALLTOALLV, 1, 0, 1, P_SYM, 0, 0, T_INT, T_INT, 1000);
        run(x, C_ALLTOALLV, 1, 0, 1, P_SYM, 1, 0, T_INT, T_INT, 1000);
    }
}

/* -V: each collective, blocking and nonblocking, on calls xccl carries. */
static void carried(ctx_t *x)
{
    static const size_t sz[] = { 1, 1000, 20000 };
    for (int nb = 0; nb < 2; nb++) {
        for (int s = 0; s < 3; s++) {
            for (int ip = 0; ip < 2; ip++) {
                int root = pick_root(x);
                run(x, C_REDUCE, nb, root, ip, P_EVEN, 0, s % 2 ? O_MAX : O_SUM, T_INT, T_INT, sz[s]);
                run(x, C_BARRIER, nb, 0, 0, 0, 0, 0, -1, -1, 0);
                run(x, C_GATHER, nb, root, ip, P_EVEN, 0, 0, T_INT, T_INT, sz[s]);
                run(x, C_SCATTER, nb, root, ip, P_EVEN, 0, 0, T_INT, T_INT, sz[s]);
                for (int coll = C_ALLGATHERV; coll <= C_SCATTERV; coll++) {
                    int pat = C_ALLTOALLV == coll && ip ? P_SYM : P_UNEVEN;
                    if (coll != C_GATHER && coll != C_SCATTER) {
                        run(x, coll, nb, root, ip, s % 2 ? pat : P_EVEN, s % 2, 0, T_INT, T_INT, sz[s]);
                    }
                }
            }
        }
    }
}

static void ctx_init(ctx_t *x, MPI_Comm comm, const char *name)
{
    memset(x, 0, sizeof(*x));
    x->comm = comm;
    x->name = name;
    x->fatal = 1;
    MPI_Comm_rank(comm, &x->rank);
    MPI_Comm_size(comm, &x->size);
    for (int c = 0; c < NCOLL; c++) {
        x->calls[c] = call_new(x);
    }
    x->extra = call_new(x);
}

static void ctx_fini(ctx_t *x)
{
    for (int c = 0; c < NCOLL; c++) {
        call_free(x->calls[c]);
    }
    call_free(x->extra);
}

/* ------------------------------------------------------------- threads */

typedef struct {
    ctx_t x;
    int lv;
} thread_arg_t;

static void *thread_main(void *arg)
{
    thread_arg_t *t = arg;
    sweep(&t->x, t->lv);
    return NULL;
}

static void step(const char *what)
{
    if (0 == world_rank) {
        printf("step %s\n", what);
        fflush(stdout);
    }
}

static void usage(const char *prog)
{
    if (0 == world_rank) {
        fprintf(stderr, "usage: %s [-q] [-c coll,...] [-a | -V | --stock-ialltoallv-inplace] "
                        "[--skip-ialltoallv-inplace]\n", prog);
    }
    MPI_Finalize();
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int c = 0; c < NCOLL; c++) {
        coll_on[c] = 1;
    }
    for (int i = 1; i < argc; i++) {
        if (0 == strcmp(argv[i], "-q")) {
            opt_quick = 1;
        } else if (0 == strcmp(argv[i], "-a")) {
            opt_only_a2av = 1;
        } else if (0 == strcmp(argv[i], "-V")) {
            opt_carried = 1;
        } else if (0 == strcmp(argv[i], "--stock-ialltoallv-inplace")) {
            opt_stock = 1;
        } else if (0 == strcmp(argv[i], "--skip-ialltoallv-inplace")) {
            opt_skip_a2av_inplace = 1;
        } else if (0 == strcmp(argv[i], "-c") && i + 1 < argc) {
            char *list = argv[++i], *save = NULL;
            for (int c = 0; c < NCOLL; c++) {
                coll_on[c] = 0;
            }
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int c = 0; c < NCOLL; c++) {
                    if (0 == strcmp(tok, coll_name[c])) {
                        coll_on[c] = found = 1;
                    }
                }
                if (!found) {
                    usage(argv[0]);
                }
            }
        } else {
            usage(argv[0]);
        }
    }
}

/* --stock-ialltoallv-inplace: passes when stock gets it wrong. */
static int stock_mode(ctx_t *x)
{
    long wrong = 0;
    x->fatal = 0;
    ialltoallv_inplace(x);
    MPI_Allreduce(&x->wrong, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == world_rank) {
        if (wrong > 0) {
            printf("stock ialltoallv in place: wrong (a wrong element in %ld of the calls, counted over "
                   "the %d ranks), as expected of Open MPI 4.1.4's libnbc\n", wrong, world_size);
            printf("RESULT: 1 passed, 0 failed\n");
        } else {
            printf("stock ialltoallv in place: every element right; this case expects stock to be wrong "
                   "(np %d): has it been fixed?\n", world_size);
            printf("RESULT: 0 passed, 1 failed\n");
        }
    }
    return wrong > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    int provided = 0, failed = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    parse(argc, argv);
    if (world_size > 64) {
        usage(argv[0]);
    }
    types_init();

    ctx_t world;
    ctx_init(&world, MPI_COMM_WORLD, "world");
    long checks = 0, all = 0;
    if (opt_stock) {
        int rc = stock_mode(&world);
        ctx_fini(&world);
        types_free();
        MPI_Finalize();
        return rc;
    }
    if (opt_only_a2av) {
        step("ialltoallv in place, uneven blocks");
        ialltoallv_inplace(&world);
        checks += world.checks;
    } else if (opt_carried) {
        step("carried");
        carried(&world);
        checks += world.checks;
        printf("CALLS rank=%d", world_rank);
        for (int c = 0; c < NCOLL; c++) {
            printf(" %s=%ld i%s=%ld", coll_name[c], world.ncalls[c][0], coll_name[c], world.ncalls[c][1]);
        }
        printf("\n");
    } else {
        const int lv = opt_quick ? L_QUICK : L_FULL;
        step("world");
        sweep(&world, lv);
        if (coll_on[C_ALLTOALLV]) {
            ialltoallv_inplace(&world);
        }
        checks += world.checks;

        MPI_Comm dup, split;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        /* odd and even ranks, each in reverse order */
        MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_size - world_rank, &split);
        ctx_t xd, xs;
        ctx_init(&xd, dup, "dup");
        ctx_init(&xs, split, "split");
        step("dup");
        sweep(&xd, lv - 1);
        step("split");
        sweep(&xs, lv - 1);
        checks += xd.checks + xs.checks;
        ctx_fini(&xd);
        ctx_fini(&xs);
        MPI_Comm_free(&dup);
        MPI_Comm_free(&split);

        step("threads");
        if (provided < MPI_THREAD_MULTIPLE) {
            printf("FAIL rank=%d: MPI_THREAD_MULTIPLE asked for, %d provided: the two-thread part cannot run\n",
                   world_rank, provided);
            failed = 1;
        } else {
            thread_arg_t ta[2];
            pthread_t th[2];
            MPI_Comm tc[2];
            static const char *const tname[2] = { "thread0", "thread1" };
            for (int i = 0; i < 2; i++) {
                MPI_Comm_dup(MPI_COMM_WORLD, &tc[i]);
                ctx_init(&ta[i].x, tc[i], tname[i]);
                ta[i].lv = L_TINY;
            }
            for (int i = 0; i < 2; i++) {
                if (pthread_create(&th[i], NULL, thread_main, &ta[i])) {
                    printf("FAIL rank=%d: pthread_create\n", world_rank);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                checks += ta[i].x.checks;
                ctx_fini(&ta[i].x);
                MPI_Comm_free(&tc[i]);
            }
        }
    }
    int any_failed = 0;
    MPI_Allreduce(&checks, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (0 == world_rank) {
        printf("RESULT: %ld passed, %d failed\n", all, any_failed);
    }
    ctx_fini(&world);
    types_free();
    MPI_Finalize();
    return any_failed;
}
