/*
 * xccl_mpi_mixed: ranks describe the same message with different datatypes
 * of the same type signature, as MPI allows for data movement.
 *
 * usage: xccl_mpi_mixed [-c reduce,bcast,allgather,alltoall,persistent] [-t contig,vector,indexed,resized]
 *        (default: every collective, every derived type)
 *
 * Movement (bcast, allgather, alltoall; blocking and nonblocking; allgather
 * and alltoall also MPI_IN_PLACE): in one half of the runs even ranks use
 * MPI_INT and odd ranks a derived type holding the same ints, in the other
 * half the other way round.  Derived types (u ints each):
 *   vector   MPI_Type_vector(4, 1, 2, MPI_INT), extent 8 ints  gap after each int
 *   indexed  blocks {2,1,1} at {0,3,5}, extent 7 ints          gaps at 2, 4, 6
 *   resized  MPI_INT with extent 12 bytes                      2 ints of gap each
 *   contig   MPI_Type_contiguous(4, MPI_INT)                   no gaps
 * Sizes: 12 ints, 64 KiB, 65530 ints (the types of one int only), 1 MiB
 * (bcast) or 256 KiB per block (allgather, alltoall); bcast from every root.
 * Every element received is checked, and every gap of a derived type must
 * hold what it held before the call.
 *
 * Persistent requests (MPI_<Coll>_init, MPIX_ on Open MPI 4.1) of the same
 * movements, mixed the same way: one init, then three starts with new
 * data each, the receive buffer emptied before each start.  At init xccl
 * decides each rank's way of running the starts (a kept call on host
 * buffers, or its nonblocking road); a rank whose description needs
 * packing must still run the same schedule as one whose does not.
 *
 * Reductions (allreduce, in place too, and reduce_scatter_block, blocking
 * and nonblocking) on one derived type on every rank, as MPI requires:
 * MPI_Type_contiguous(3, MPI_DOUBLE) and the vector type above, summed by a
 * commutative user op (Open MPI 4.1's MPI layer refuses predefined ops on
 * derived types: "MPI_SUM is not defined for non-intrinsic datatypes");
 * integer values, so every result is exact; gaps checked as above.
 *
 * Under xccl this hung: ranks with a contiguous description ran xccl's
 * schedule while ranks with a noncontiguous one handed the call to the
 * fallback module.  The order of the steps (bcast, allgather, alltoall,
 * reductions) and of the types puts that hang first; -c and -t run parts.
 *
 * Output: "step <name>" lines (rank 0), "FAIL ..." lines, then from rank 0
 *   RESULT: <passed> passed, <failed> failed
 * Exit status 0 when every check passed on every rank.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/xccl_mpi_pnames.h"

#if !XCCL_MPI_HAVE_PERSIST
#error "no persistent collectives: neither MPI_<Coll>_init (MPI-4) nor MPIX_<Coll>_init (Open MPI pcollreq)"
#endif

#define GAP ((int) 0x5a5a5a5a)   /* what gaps hold; never a value sent */
#define EMPTY (-1)               /* what receive positions hold before a call */

static int rank, size, checks, fails;
static const char *types_wanted = "contig,vector,indexed,resized";

/* A description of u ints per unit: positions off[] inside a unit of ext ints. */
typedef struct {
    const char *name;
    MPI_Datatype dt;
    int u, ext;
    int off[4];
} layout_t;

static layout_t L_INT = { "int", MPI_INT, 1, 1, { 0 } };
static layout_t derived[4] = {
    { "vector", MPI_DATATYPE_NULL, 4, 8, { 0, 2, 4, 6 } },
    { "indexed", MPI_DATATYPE_NULL, 4, 7, { 0, 1, 3, 5 } },
    { "resized", MPI_DATATYPE_NULL, 1, 3, { 0 } },
    { "contig", MPI_DATATYPE_NULL, 4, 4, { 0, 1, 2, 3 } },
};
#define VECTOR (&derived[0])
#define NDERIVED 4

static void make_types(void)
{
    MPI_Datatype t;
    MPI_Type_vector(4, 1, 2, MPI_INT, &t);
    MPI_Type_create_resized(t, 0, 8 * sizeof(int), &derived[0].dt);
    MPI_Type_free(&t);
    int bl[3] = { 2, 1, 1 }, dp[3] = { 0, 3, 5 };
    MPI_Type_indexed(3, bl, dp, MPI_INT, &t);
    MPI_Type_create_resized(t, 0, 7 * sizeof(int), &derived[1].dt);
    MPI_Type_free(&t);
    MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &derived[2].dt);
    MPI_Type_contiguous(4, MPI_INT, &derived[3].dt);
    for (int i = 0; i < NDERIVED; i++) {
        MPI_Type_commit(&derived[i].dt);
    }
}

/* Position (in ints) of element e of a message in layout l. */
static size_t pos(const layout_t *l, size_t e)
{
    return (e / (size_t) l->u) * (size_t) l->ext + (size_t) l->off[e % (size_t) l->u];
}

/* Ints a buffer of n elements in layout l spans. */
static size_t span(const layout_t *l, size_t n)
{
    return (n / (size_t) l->u) * (size_t) l->ext;
}

/* A buffer of n elements in layout l: gaps GAP, elements EMPTY. */
static int *alloc_buf(const layout_t *l, size_t n)
{
    size_t s = span(l, n);
    int *b = malloc((s ? s : 1) * sizeof(int));
    for (size_t i = 0; i < s; i++) {
        b[i] = GAP;
    }
    for (size_t e = 0; e < n; e++) {
        b[pos(l, e)] = EMPTY;
    }
    return b;
}

static int val(int r, size_t e, int t)
{
    return (int) (((uint32_t) (r + 1) * 2654435761u + (uint32_t) e * 40503u + (uint32_t) t * 977u) &
                  0x3fffffff);
}

static void expect(int ok, const char *what, const char *detail)
{
    checks++;
    if (!ok) {
        fails++;
        printf("FAIL rank=%d %s: %s\n", rank, what, detail);
    }
}

static void step(const char *name)
{
    if (0 == rank) {
        printf("step %s\n", name);
        fflush(stdout);
    }
}

/* Checks n elements of b (layout l) against want(e) and its gaps against GAP. */
typedef int (*want_fn)(size_t e, const void *ctx);
static void check_buf(const char *what, const layout_t *l, const int *b, size_t n, want_fn want,
                      const void *ctx)
{
    char d[200] = "";
    int ok = 1;
    size_t s = span(l, n), next = 0;
    for (size_t e = 0; e < n && ok; e++) {
        size_t p = pos(l, e);
        for (; next < p && ok; next++) {
            if (b[next] != GAP) {
                ok = 0;
                snprintf(d, sizeof d, "gap at int %zu (before element %zu) overwritten: %d",
                         next, e, b[next]);
            }
        }
        next = p + 1;
        if (ok && b[p] != want(e, ctx)) {
            ok = 0;
            snprintf(d, sizeof d, "element %zu (int %zu) got=%d want=%d", e, p, b[p], want(e, ctx));
        }
    }
    for (; next < s && ok; next++) {
        if (b[next] != GAP) {
            ok = 0;
            snprintf(d, sizeof d, "trailing gap at int %zu overwritten: %d", next, b[next]);
        }
    }
    expect(ok, what, d);
}

/* ------------------------------------------------------------ movement */

/* The layout rank r uses in mode m: 0 even int / odd D, 1 even D / odd int. */
static const layout_t *layout_of(int r, int mode, const layout_t *D)
{
    return (r % 2 == mode) ? &L_INT : D;
}

typedef struct {
    int root, t;
    size_t n;
} want_ctx_t;

static int want_bcast(size_t e, const void *p)
{
    const want_ctx_t *c = p;
    return val(c->root, e, c->t);
}

/* allgather: element j * n + e comes from rank j */
static int want_allgather(size_t e, const void *p)
{
    const want_ctx_t *c = p;
    return val((int) (e / c->n), e % c->n, c->t);
}

/* alltoall: rank s sends val(s, d * n + e) to rank d; I get from s at s * n + e */
static int want_alltoall(size_t e, const void *p)
{
    const want_ctx_t *c = p;
    return val((int) (e / c->n), (size_t) rank * c->n + e % c->n, c->t);
}

static const size_t sizes_bcast[] = { 12, 16384, 65530, 262144 };
static const size_t sizes_block[] = { 12, 16384, 65530, 65536 };
#define NSZ 4

static void test_bcast(int t0)
{
    char what[160];
    int t = t0;
    for (int di = 0; di < NDERIVED; di++) {
        if (!strstr(types_wanted, derived[di].name)) {
            continue;
        }
        for (int mode = 0; mode < 2; mode++) {
            for (int k = 0; k < NSZ; k++) {
                const size_t n = sizes_bcast[k];
                const layout_t *me = layout_of(rank, mode, &derived[di]);
                if (n % (size_t) derived[di].u) {
                    continue;
                }
                for (int root = 0; root < size; root++) {
                    for (int nb = 0; nb < 2; nb++, t++) {
                        int *b = alloc_buf(me, n);
                        want_ctx_t c = { root, t, n };
                        if (rank == root) {
                            for (size_t e = 0; e < n; e++) {
                                b[pos(me, e)] = val(root, e, t);
                            }
                        }
                        int count = (int) (n / (size_t) me->u);
                        if (nb) {
                            MPI_Request r;
                            MPI_Ibcast(b, count, me->dt, root, MPI_COMM_WORLD, &r);
                            MPI_Wait(&r, MPI_STATUS_IGNORE);
                        } else {
                            MPI_Bcast(b, count, me->dt, root, MPI_COMM_WORLD);
                        }
                        snprintf(what, sizeof what, "%sbcast %s ints=%zu root=%d (mine %s x %d)",
                                 nb ? "i" : "", derived[di].name, n, root, me->name, count);
                        check_buf(what, me, b, n, want_bcast, &c);
                        free(b);
                    }
                }
            }
        }
    }
}

/* allgather (alltoall == 0) or alltoall; in place where asked. */
static void test_movement(int alltoall, int t0)
{
    char what[200];
    int t = t0;
    const char *cname = alltoall ? "alltoall" : "allgather";
    for (int di = 0; di < NDERIVED; di++) {
        if (!strstr(types_wanted, derived[di].name)) {
            continue;
        }
        for (int mode = 0; mode < 2; mode++) {
            for (int k = 0; k < NSZ; k++) {
                const size_t n = sizes_block[k];
                const layout_t *me = layout_of(rank, mode, &derived[di]);
                if (n % (size_t) derived[di].u) {
                    continue;
                }
                const int count = (int) (n / (size_t) me->u);
                const size_t P = (size_t) size;
                for (int form = 0; form < 4; form++, t++) {
                    const int nb = form & 1, in_place = form & 2;
                    want_ctx_t c = { 0, t, n };
                    int *r = alloc_buf(me, n * P);
                    int *s = NULL;
                    if (alltoall) {
                        if (in_place) {
                            for (size_t e = 0; e < n * P; e++) {
                                r[pos(me, e)] = val(rank, e, t);
                            }
                        } else {
                            s = alloc_buf(me, n * P);
                            for (size_t e = 0; e < n * P; e++) {
                                s[pos(me, e)] = val(rank, e, t);
                            }
                        }
                    } else if (in_place) {
                        for (size_t e = 0; e < n; e++) {
                            r[pos(me, (size_t) rank * n + e)] = val(rank, e, t);
                        }
                    } else {
                        s = alloc_buf(me, n);
                        for (size_t e = 0; e < n; e++) {
                            s[pos(me, e)] = val(rank, e, t);
                        }
                    }
                    const void *sb = in_place ? MPI_IN_PLACE : s;
                    MPI_Request req;
                    if (alltoall && nb) {
                        MPI_Ialltoall(sb, count, me->dt, r, count, me->dt, MPI_COMM_WORLD, &req);
                    } else if (alltoall) {
                        MPI_Alltoall(sb, count, me->dt, r, count, me->dt, MPI_COMM_WORLD);
                    } else if (nb) {
                        MPI_Iallgather(sb, count, me->dt, r, count, me->dt, MPI_COMM_WORLD, &req);
                    } else {
                        MPI_Allgather(sb, count, me->dt, r, count, me->dt, MPI_COMM_WORLD);
                    }
                    if (nb) {
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                    }
                    snprintf(what, sizeof what, "%s%s%s %s ints/block=%zu (mine %s x %d)",
                             nb ? "i" : "", cname, in_place ? " in place" : "", derived[di].name,
                             n, me->name, count);
                    check_buf(what, me, r, n * P, alltoall ? want_alltoall : want_allgather, &c);
                    free(r);
                    free(s);
                }
            }
        }
    }
}

/* ------------------------------------------------------------ persistent */

/* Persistent bcast (from the first and the last rank), allgather and
 * alltoall (in place and not) on the mixed descriptions: one init, then
 * STARTS starts, each with new data and an emptied receive buffer. */
#define STARTS 3
static void test_persistent(int t0)
{
    char what[200];
    int t = t0;
    const size_t P = (size_t) size;
    for (int di = 0; di < NDERIVED; di++) {
        if (!strstr(types_wanted, derived[di].name)) {
            continue;
        }
        for (int mode = 0; mode < 2; mode++) {
            const layout_t *me = layout_of(rank, mode, &derived[di]);
            for (int k = 0; k < NSZ; k++) {
                /* 0, 1 bcast from rank 0, from the last; 2, 3 allgather;
                 * 4, 5 alltoall (odd: in place) */
                for (int form = 0; form < 6; form++) {
                    const int bcast = form < 2, alltoall = form >= 4, in_place = !bcast && (form & 1);
                    const int root = bcast && form ? size - 1 : 0;
                    const size_t n = bcast ? sizes_bcast[k] : sizes_block[k];
                    if (n % (size_t) derived[di].u) {
                        continue;
                    }
                    const int count = (int) (n / (size_t) me->u);
                    const size_t nr = bcast ? n : n * P, ns = alltoall ? n * P : n;
                    int *r = alloc_buf(me, nr), *s = in_place || bcast ? NULL : alloc_buf(me, ns);
                    MPI_Request req;
                    if (bcast) {
                        MPI_Bcast_init(r, count, me->dt, root, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
                    } else if (alltoall) {
                        MPI_Alltoall_init(in_place ? MPI_IN_PLACE : s, count, me->dt, r, count, me->dt,
                                          MPI_COMM_WORLD, MPI_INFO_NULL, &req);
                    } else {
                        MPI_Allgather_init(in_place ? MPI_IN_PLACE : s, count, me->dt, r, count, me->dt,
                                           MPI_COMM_WORLD, MPI_INFO_NULL, &req);
                    }
                    for (int st = 0; st < STARTS; st++, t++) {
                        for (size_t e = 0; e < nr; e++) {
                            r[pos(me, e)] = EMPTY;
                        }
                        int *src = in_place ? r : s;
                        if (bcast && rank == root) {
                            for (size_t e = 0; e < n; e++) {
                                r[pos(me, e)] = val(root, e, t);
                            }
                        } else if (alltoall) {
                            for (size_t e = 0; e < n * P; e++) {
                                src[pos(me, e)] = val(rank, e, t);
                            }
                        } else if (!bcast) {
                            const size_t at = in_place ? (size_t) rank * n : 0;
                            for (size_t e = 0; e < n; e++) {
                                src[pos(me, at + e)] = val(rank, e, t);
                            }
                        }
                        MPI_Start(&req);
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                        want_ctx_t c = { root, t, n };
                        snprintf(what, sizeof what, "persistent %s%s %s ints=%zu root=%d start %d "
                                 "(mine %s x %d)", bcast ? "bcast" : alltoall ? "alltoall" : "allgather",
                                 in_place ? " in place" : "", derived[di].name, n, root, st, me->name,
                                 count);
                        check_buf(what, me, r, nr,
                                  bcast ? want_bcast : alltoall ? want_alltoall : want_allgather, &c);
                    }
                    MPI_Request_free(&req);
                    free(r);
                    free(s);
                }
            }
        }
    }
}

/* ------------------------------------------------------------ reductions */

static MPI_Datatype type_d3;
static int op_bad_type;

/* MPI_SUM for the two derived types: contiguous(3, MPI_DOUBLE), and the
 * vector type (4 ints at stride 2, extent 8 ints), gaps left alone. */
static void sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt == type_d3) {
        const double *a = in;
        double *b = inout;
        for (int i = 0; i < 3 * *len; i++) {
            b[i] += a[i];
        }
    } else if (*dt == VECTOR->dt) {
        const int *a = in;
        int *b = inout;
        for (int u = 0; u < *len; u++) {
            for (int k = 0; k < 4; k++) {
                b[8 * u + 2 * k] += a[8 * u + 2 * k];
            }
        }
    } else {
        op_bad_type++;
    }
}

static void test_reductions(int t0)
{
    char what[160], d[160];
    int t = t0;
    const size_t P = (size_t) size;
    MPI_Op sum;
    MPI_Op_create(sum_fn, 1, &sum);

    /* MPI_Type_contiguous(3, MPI_DOUBLE), sum */
    MPI_Type_contiguous(3, MPI_DOUBLE, &type_d3);
    MPI_Type_commit(&type_d3);
    const MPI_Datatype d3 = type_d3;
    static const int counts3[] = { 1, 5, 4096, 43691 };   /* up to ~1 MiB */
    for (int k = 0; k < 4; k++) {
        const size_t units = (size_t) counts3[k], n = 3 * units;
        for (int form = 0; form < 6; form++, t++) {
            /* 0 allreduce, 1 iallreduce, 2 allreduce in place, 3 iallreduce in place,
             * 4 reduce_scatter_block, 5 ireduce_scatter_block */
            const int rsb = form >= 4, nb = form & 1, in_place = !rsb && (form & 2);
            const size_t nin = rsb ? n * P : n, nout = n;
            double *in = malloc(nin * sizeof(double)), *out = malloc(nout * sizeof(double));
            for (size_t i = 0; i < nin; i++) {
                in[i] = (double) (val(rank, i, t) & 0xfffff);
            }
            for (size_t i = 0; i < nout; i++) {
                out[i] = in_place ? in[i] : -1.0;
            }
            MPI_Request req;
            const void *sb = in_place ? MPI_IN_PLACE : in;
            if (rsb && nb) {
                MPI_Ireduce_scatter_block(in, out, (int) units, d3, sum, MPI_COMM_WORLD, &req);
            } else if (rsb) {
                MPI_Reduce_scatter_block(in, out, (int) units, d3, sum, MPI_COMM_WORLD);
            } else if (nb) {
                MPI_Iallreduce(sb, out, (int) units, d3, sum, MPI_COMM_WORLD, &req);
            } else {
                MPI_Allreduce(sb, out, (int) units, d3, sum, MPI_COMM_WORLD);
            }
            if (nb) {
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            int ok = 1;
            d[0] = '\0';
            for (size_t i = 0; i < nout && ok; i++) {
                const size_t gi = rsb ? (size_t) rank * n + i : i;
                double want = 0;
                for (int r = 0; r < size; r++) {
                    want += (double) (val(r, gi, t) & 0xfffff);
                }
                if (out[i] != want) {
                    ok = 0;
                    snprintf(d, sizeof d, "index %zu got=%.1f want=%.1f", i, out[i], want);
                }
            }
            snprintf(what, sizeof what, "%s%s%s contiguous(3, MPI_DOUBLE) count=%zu sum",
                     nb ? "i" : "", rsb ? "reduce_scatter_block" : "allreduce",
                     in_place ? " in place" : "", units);
            expect(ok, what, d);
            free(in);
            free(out);
        }
    }

    /* the vector type (4 ints, a gap after each), sum */
    const layout_t *V = VECTOR;
    static const size_t nvec[] = { 4, 16384, 65536 };   /* ints */
    for (int k = 0; k < 3; k++) {
        const size_t n = nvec[k];
        for (int form = 0; form < 6; form++, t++) {
            const int rsb = form >= 4, nb = form & 1, in_place = !rsb && (form & 2);
            const size_t nin = rsb ? n * P : n;
            const int count = (int) (n / (size_t) V->u);
            int *in = alloc_buf(V, nin), *out = alloc_buf(V, n);
            for (size_t e = 0; e < nin; e++) {
                in[pos(V, e)] = val(rank, e, t) & 0xffffff;
            }
            if (in_place) {
                for (size_t e = 0; e < n; e++) {
                    out[pos(V, e)] = in[pos(V, e)];
                }
            }
            MPI_Request req;
            const void *sb = in_place ? MPI_IN_PLACE : in;
            if (rsb && nb) {
                MPI_Ireduce_scatter_block(in, out, count, V->dt, sum, MPI_COMM_WORLD, &req);
            } else if (rsb) {
                MPI_Reduce_scatter_block(in, out, count, V->dt, sum, MPI_COMM_WORLD);
            } else if (nb) {
                MPI_Iallreduce(sb, out, count, V->dt, sum, MPI_COMM_WORLD, &req);
            } else {
                MPI_Allreduce(sb, out, count, V->dt, sum, MPI_COMM_WORLD);
            }
            if (nb) {
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            int ok = 1;
            d[0] = '\0';
            size_t next = 0;
            for (size_t e = 0; e < n && ok; e++) {
                const size_t ge = rsb ? (size_t) rank * n + e : e, p = pos(V, e);
                int want = 0;
                for (int r = 0; r < size; r++) {
                    want += val(r, ge, t) & 0xffffff;
                }
                for (; next < p && ok; next++) {
                    if (out[next] != GAP) {
                        ok = 0;
                        snprintf(d, sizeof d, "gap at int %zu overwritten: %d", next, out[next]);
                    }
                }
                next = p + 1;
                if (ok && out[p] != want) {
                    ok = 0;
                    snprintf(d, sizeof d, "element %zu got=%d want=%d", e, out[p], want);
                }
            }
            for (; next < span(V, n) && ok; next++) {
                if (out[next] != GAP) {
                    ok = 0;
                    snprintf(d, sizeof d, "trailing gap at int %zu overwritten: %d", next, out[next]);
                }
            }
            snprintf(what, sizeof what, "%s%s%s vector(4,1,2,MPI_INT) ints=%zu sum", nb ? "i" : "",
                     rsb ? "reduce_scatter_block" : "allreduce", in_place ? " in place" : "", n);
            expect(ok, what, d);
            free(in);
            free(out);
        }
    }
    expect(0 == op_bad_type, "the user op saw only the two derived types", "another type");
    MPI_Type_free(&type_d3);
    MPI_Op_free(&sum);
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    const char *which = "reduce,bcast,allgather,alltoall,persistent";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (0 == strcmp(argv[i], "-c") && i + 1 < argc) {
            which = argv[++i];
        } else if (0 == strcmp(argv[i], "-t") && i + 1 < argc) {
            types_wanted = argv[++i];
        } else {
            if (0 == rank) {
                fprintf(stderr, "usage: %s [-c reduce,bcast,allgather,alltoall,persistent] "
                                "[-t contig,vector,indexed,resized]\n", argv[0]);
            }
            MPI_Finalize();
            return 2;
        }
    }
    make_types();
    if (strstr(which, "bcast")) {
        step("bcast");
        test_bcast(2000);
    }
    if (strstr(which, "allgather")) {
        step("allgather");
        test_movement(0, 3000);
    }
    if (strstr(which, "alltoall")) {
        step("alltoall");
        test_movement(1, 4000);
    }
    if (strstr(which, "persistent")) {
        step("persistent");
        test_persistent(5000);
    }
    if (strstr(which, "reduce")) {
        step("reductions on derived types");
        test_reductions(1000);
    }
    step("done");
    for (int i = 0; i < NDERIVED; i++) {
        MPI_Type_free(&derived[i].dt);
    }

    int mine[2] = { checks, fails }, all[2] = { 0, 0 };
    MPI_Reduce(mine, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("RESULT: %d passed, %d failed\n", all[0] - all[1], all[1]);
    }
    MPI_Finalize();
    return all[1] ? 1 : 0;
}
