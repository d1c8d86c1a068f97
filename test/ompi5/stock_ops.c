/*
 * Does the stock Open MPI this was built against still compute the two
 * reductions xccl works around?  (coll_xccl_compat.h decides per version
 * whether xccl runs them itself below coll_xccl_small_msg_bytes; this
 * program measures, so the decision follows the library, not an
 * assumption.)
 *
 *   (a) MPI_SUM on 8- and 16-bit integers saturates instead of wrapping
 *       (op/avx, ompi#8045);
 *   (b) MPI_MAX/MPI_MIN on MPI_UNSIGNED_LONG compare as signed (ompi#10525).
 *
 * Each is tried through MPI_Reduce_local (the op framework) and through
 * MPI_Allreduce on MPI_COMM_WORLD (run it with the stock collectives only,
 * e.g. --mca coll tuned,basic,libnbc,self), at counts from 1 to 65536, so
 * that vector and scalar loops both run.  Prints one line per case and
 *   STOCK sum_saturates=<0|1> ul_maxmin_signed=<0|1>
 *   COMPAT sum_saturates=<0|1> ul_maxmin_signed=<0|1>
 * (the second: what coll_xccl_compat.h assumes for this version) and exits
 * 0 when they agree, 1 when not.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi_coll_xccl/coll_xccl_compat.h"

static const int counts[] = { 1, 7, 31, 64, 1000, 65536 };
#define NCOUNTS ((int) (sizeof(counts) / sizeof(counts[0])))

typedef struct {
    const char *name;
    MPI_Datatype type;
    size_t size;
    int is_signed;
} itype_t;

/* Every element overflows: a = b = 3/4 of the type's range.  Wrapping
 * gives a + b modulo 2^bits, saturating the type's maximum. */
static int sum_wrong(const itype_t *t, int count, int allreduce, int *wrong)
{
    const int bits = (int) t->size * 8;
    const int64_t big = t->is_signed ? (int64_t) ((1LL << (bits - 1)) - 1) * 3 / 4
                                     : (int64_t) ((1LL << bits) - 1) * 3 / 4;
    char *a = malloc((size_t) count * t->size), *b = malloc((size_t) count * t->size);
    int nwrong = 0;
    if (NULL == a || NULL == b) {
        return -1;
    }
    for (int i = 0; i < count; i++) {
        memcpy(a + (size_t) i * t->size, &big, t->size);   /* little endian */
        memcpy(b + (size_t) i * t->size, &big, t->size);
    }
    if (allreduce) {
        /* each rank contributes big: the sum of nprocs copies */
        MPI_Allreduce(a, b, count, t->type, MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Reduce_local(a, b, count, t->type, MPI_SUM);
    }
    int nprocs = 1;
    if (allreduce) {
        MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    }
    const uint64_t mask = bits == 64 ? ~0ULL : (1ULL << bits) - 1;
    const uint64_t want = ((uint64_t) big * (uint64_t) (allreduce ? nprocs : 2)) & mask;
    for (int i = 0; i < count; i++) {
        uint64_t got = 0;
        memcpy(&got, b + (size_t) i * t->size, t->size);
        nwrong += (got & mask) != want;
    }
    free(a);
    free(b);
    *wrong = nwrong;
    return 0;
}

/* max(2^63 + 1, 1) and min(2^63 + 1, 1) as unsigned: 2^63 + 1 and 1. */
static void ul_wrong(MPI_Op op, int count, int allreduce, int *wrong)
{
    unsigned long *a = malloc((size_t) count * sizeof(*a));
    unsigned long *b = malloc((size_t) count * sizeof(*b));
    const unsigned long hi = (1UL << 63) + 1, lo = 1;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < count; i++) {
        /* even elements: the big value comes first, odd: second */
        a[i] = (i % 2) ? lo : hi;
        b[i] = (i % 2) ? hi : lo;
        if (allreduce && rank % 2) {
            a[i] = b[i];
        }
    }
    if (allreduce) {
        MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_UNSIGNED_LONG, op, MPI_COMM_WORLD);
        memcpy(b, a, (size_t) count * sizeof(*a));
    } else {
        MPI_Reduce_local(a, b, count, MPI_UNSIGNED_LONG, op);
    }
    int nprocs = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const unsigned long want = MPI_MAX == op ? hi : lo;
    int nwrong = 0;
    for (int i = 0; i < count; i++) {
        /* with one rank an allreduce sees only a[]: both operands equal */
        const unsigned long w = allreduce && 1 == nprocs ? ((i % 2) ? lo : hi) : want;
        nwrong += b[i] != w;
    }
    free(a);
    free(b);
    *wrong = nwrong;
}

int main(int argc, char **argv)
{
    const itype_t types[] = {
        { "MPI_CHAR", MPI_CHAR, 1, 1 },            { "MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, 1, 1 },
        { "MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, 1, 0 }, { "MPI_INT8_T", MPI_INT8_T, 1, 1 },
        { "MPI_UINT8_T", MPI_UINT8_T, 1, 0 },      { "MPI_SHORT", MPI_SHORT, 2, 1 },
        { "MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, 2, 0 }, { "MPI_INT16_T", MPI_INT16_T, 2, 1 },
        { "MPI_UINT16_T", MPI_UINT16_T, 2, 0 },
    };
    int rank, sat = 0, ul = 0, rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int via = 0; via < 2; via++) {
        const char *how = via ? "MPI_Allreduce" : "MPI_Reduce_local";
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            int bad_counts = 0, first_bad = 0;
            for (int c = 0; c < NCOUNTS; c++) {
                int wrong = 0;
                if (0 != sum_wrong(&types[t], counts[c], via, &wrong)) {
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                if (wrong && !bad_counts++) {
                    first_bad = counts[c];
                }
            }
            sat |= bad_counts > 0;
            if (0 == rank) {
                printf("sum %-18s %-16s %s", types[t].name, how,
                       bad_counts ? "SATURATES" : "wraps");
                if (bad_counts) {
                    printf(" (%d of %d counts, from count %d)", bad_counts, NCOUNTS, first_bad);
                }
                printf("\n");
            }
        }
        for (int o = 0; o < 2; o++) {
            int bad_counts = 0;
            for (int c = 0; c < NCOUNTS; c++) {
                int wrong = 0;
                ul_wrong(o ? MPI_MIN : MPI_MAX, counts[c], via, &wrong);
                bad_counts += wrong > 0;
            }
            ul |= bad_counts > 0;
            if (0 == rank) {
                printf("%s MPI_UNSIGNED_LONG %-16s %s\n", o ? "min" : "max", how,
                       bad_counts ? "SIGNED COMPARE" : "unsigned compare");
            }
        }
    }
    /* every rank judged the same results */
    if (0 == rank) {
        printf("STOCK sum_saturates=%d ul_maxmin_signed=%d\n", sat, ul);
        printf("COMPAT sum_saturates=%d ul_maxmin_signed=%d\n", XCCL_STOCK_SUM_SATURATES,
               XCCL_STOCK_UL_MAXMIN_SIGNED);
        rc = sat != XCCL_STOCK_SUM_SATURATES || ul != XCCL_STOCK_UL_MAXMIN_SIGNED;
        printf("RESULT: %s\n", rc ? "compat header disagrees with this Open MPI" : "agree");
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
