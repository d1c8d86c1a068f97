/*
 * Staging plans (gpu/xccl_stage.c), without a GPU: every rank's plan is run
 * on host memory (2-D copies with memcpy, each chunk's collective computed
 * here across all ranks' slots) and the user buffers must end up as the
 * whole collective computed directly.  Two copy orders are run: chunk by
 * chunk (in, collective, out), and all copies in before any copy out, the
 * extremes of what the pipelined engine may do.  Copies are checked to stay
 * inside the user buffers and the slot.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xccl_stage.h"

typedef struct {
    xccl_coll_t coll;
    int size, in_place, root;
    size_t count, block, chunk;     /* count: allreduce/RS per-rank unit (elements); bcast bytes */
    int irregular;                  /* reduce_scatter: counts vary by rank (some 0) */
} cfg_t;

typedef struct {
    unsigned char *sbuf, *rbuf;     /* user buffers */
    size_t sbytes, rbytes;
    unsigned char *slot;
    xccl_stage_plan_t plan;
} rank_t;

static size_t rs_count(const cfg_t *c, int i)
{
    return c->irregular ? (size_t) ((i * 7 + 3) % 5) * c->count / 2 : c->count;
}

static void copy2d(unsigned char *dst, size_t dbytes, size_t doff, size_t dpitch,
                   const unsigned char *src, size_t sbytes, size_t soff, size_t spitch,
                   size_t width, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        size_t d = doff + r * dpitch, s = soff + r * spitch;
        ck_assert_msg(d + width <= dbytes && s + width <= sbytes,
                      "copy out of bounds: dst %zu+%zu of %zu, src %zu+%zu of %zu", d, width,
                      dbytes, s, width, sbytes);
        memmove(dst + d, src + s, width);
    }
}

static void copy_in(rank_t *r, const cfg_t *c, const xccl_stage_chunk_t *ch)
{
    const unsigned char *src = c->in_place || XCCL_COLL_BCAST == c->coll ? r->rbuf : r->sbuf;
    size_t sbytes = c->in_place || XCCL_COLL_BCAST == c->coll ? r->rbytes : r->sbytes;
    for (int i = 0; i < ch->nin; i++) {
        const xccl_stage_copy_t *x = &ch->in[i];
        copy2d(r->slot, r->plan.slot_bytes, x->soff, x->spitch, src, sbytes, x->uoff, x->upitch,
               x->width, x->rows);
    }
}

static void copy_out(rank_t *r, const xccl_stage_chunk_t *ch)
{
    for (int i = 0; i < ch->nout; i++) {
        const xccl_stage_copy_t *x = &ch->out[i];
        copy2d(r->rbuf, r->rbytes, x->uoff, x->upitch, r->slot, r->plan.slot_bytes, x->soff,
               x->spitch, x->width, x->rows);
    }
}

/* Chunk k's host collective across all ranks' slots (int32 sums). */
static void chunk_collective(rank_t *R, const cfg_t *c, int k)
{
    const int P = c->size;
    const xccl_stage_chunk_t *c0 = &R[0].plan.chunks[k];
    for (int q = 0; q < P; q++) {
        ck_assert_uint_eq(R[q].plan.chunks[k].count, c0->count);   /* all ranks agree */
        ck_assert_uint_le(R[q].plan.chunks[k].slot_bytes, R[q].plan.slot_bytes);
    }
    switch (c->coll) {
    case XCCL_COLL_ALLREDUCE:
        for (size_t e = 0; e < c0->count; e++) {
            int32_t sum = 0;
            for (int q = 0; q < P; q++) {
                sum += ((int32_t *) R[q].slot)[e];
            }
            for (int q = 0; q < P; q++) {
                memcpy(R[q].slot + R[q].plan.chunks[k].recv_off + e * 4, &sum, 4);
            }
        }
        break;
    case XCCL_COLL_BCAST:
        for (int q = 0; q < P; q++) {
            memcpy(R[q].slot, R[c->root].slot, c0->count);
        }
        break;
    case XCCL_COLL_ALLGATHER:
        for (int q = 0; q < P; q++) {
            for (int j = 0; j < P; j++) {
                memcpy(R[q].slot + c0->recv_off + (size_t) j * c0->count, R[j].slot, c0->count);
            }
        }
        break;
    case XCCL_COLL_ALLTOALL:
        for (int q = 0; q < P; q++) {
            for (int j = 0; j < P; j++) {   /* q receives j's block for q */
                memcpy(R[q].slot + c0->recv_off + (size_t) j * c0->count,
                       R[j].slot + (size_t) q * c0->count, c0->count);
            }
        }
        break;
    default: {
        size_t off = 0;
        for (int q = 0; q < P; q++) {
            size_t n = c0->counts[q];
            for (int j = 0; j < P; j++) {
                ck_assert_uint_eq(R[j].plan.chunks[k].counts[q], n);
            }
            ck_assert_uint_eq(R[q].plan.chunks[k].recv_off, c0->recv_off);
            for (size_t e = 0; e < n; e++) {
                int32_t sum = 0;
                for (int j = 0; j < P; j++) {
                    sum += ((int32_t *) R[j].slot)[off + e];
                }
                memcpy(R[q].slot + c0->recv_off + e * 4, &sum, 4);
            }
            off += n;
        }
    }
    }
}

static int32_t input(int rank, size_t i) { return (int32_t) (rank * 1000003 + (int) i * 7 + 1); }

/* Fills the user buffers and returns the expected RECV of every rank. */
static unsigned char **setup(rank_t *R, const cfg_t *c)
{
    const int P = c->size;
    unsigned char **want = calloc((size_t) P, sizeof(*want));
    size_t total_rs = 0;
    for (int q = 0; q < P; q++) {
        total_rs += rs_count(c, q);
    }
    for (int q = 0; q < P; q++) {
        rank_t *r = &R[q];
        switch (c->coll) {
        case XCCL_COLL_ALLREDUCE:
            r->sbytes = r->rbytes = c->count * 4;
            break;
        case XCCL_COLL_BCAST:
            r->sbytes = 0;
            r->rbytes = c->count;
            break;
        case XCCL_COLL_ALLGATHER:
            r->sbytes = c->block;
            r->rbytes = (size_t) P * c->block;
            break;
        case XCCL_COLL_ALLTOALL:
            r->sbytes = r->rbytes = (size_t) P * c->block;
            break;
        default:
            r->sbytes = total_rs * 4;
            r->rbytes = c->in_place ? total_rs * 4 : rs_count(c, q) * 4;
        }
        r->sbuf = malloc(r->sbytes + 1);
        r->rbuf = malloc(r->rbytes + 1);
        want[q] = malloc(r->rbytes + 1);
        /* in place: the input lives in RECV */
        unsigned char *in = c->in_place ? r->rbuf : r->sbuf;
        size_t in_bytes = c->in_place ? r->rbytes : r->sbytes;
        if (XCCL_COLL_BCAST == c->coll) {
            in = r->rbuf;
            in_bytes = r->rbytes;
        }
        for (size_t i = 0; i + 4 <= in_bytes; i += 4) {
            int32_t v = input(q, i / 4);
            memcpy(in + i, &v, 4);
        }
        if (XCCL_COLL_ALLGATHER == c->coll && !c->in_place) {
            memset(r->rbuf, 0xee, r->rbytes);
        } else if (XCCL_COLL_ALLGATHER == c->coll) {
            /* in place: own block at its place, the rest garbage */
            memset(r->rbuf, 0xee, r->rbytes);
            for (size_t i = 0; i < c->block; i++) {
                r->rbuf[(size_t) q * c->block + i] = (unsigned char) (q * 31 + i);
            }
        } else if (XCCL_COLL_ALLGATHER != c->coll && !c->in_place && XCCL_COLL_BCAST != c->coll) {
            memset(r->rbuf, 0xee, r->rbytes);
        }
        if (XCCL_COLL_ALLGATHER == c->coll && !c->in_place) {
            for (size_t i = 0; i < c->block; i++) {
                r->sbuf[i] = (unsigned char) (q * 31 + i);
            }
        }
        if (XCCL_COLL_ALLTOALL == c->coll) {
            for (size_t i = 0; i < (size_t) P * c->block; i++) {
                in[i] = (unsigned char) (q * 17 + i * 3);
            }
        }
        if (XCCL_COLL_BCAST == c->coll) {
            for (size_t i = 0; i < c->count; i++) {
                r->rbuf[i] = q == c->root ? (unsigned char) (i * 5 + 1) : 0xee;
            }
        }
    }
    for (int q = 0; q < P; q++) {
        unsigned char *w = want[q];
        switch (c->coll) {
        case XCCL_COLL_ALLREDUCE:
            for (size_t e = 0; e < c->count; e++) {
                int32_t sum = 0;
                for (int j = 0; j < P; j++) {
                    sum += input(j, e);
                }
                memcpy(w + e * 4, &sum, 4);
            }
            break;
        case XCCL_COLL_BCAST:
            for (size_t i = 0; i < c->count; i++) {
                w[i] = (unsigned char) (i * 5 + 1);
            }
            break;
        case XCCL_COLL_ALLGATHER:
            for (int j = 0; j < P; j++) {
                for (size_t i = 0; i < c->block; i++) {
                    w[(size_t) j * c->block + i] = (unsigned char) (j * 31 + i);
                }
            }
            break;
        case XCCL_COLL_ALLTOALL:
            for (int j = 0; j < P; j++) {
                for (size_t i = 0; i < c->block; i++) {
                    w[(size_t) j * c->block + i] = (unsigned char) (j * 17 + ((size_t) q * c->block + i) * 3);
                }
            }
            break;
        default: {
            size_t displ = 0;
            for (int j = 0; j < q; j++) {
                displ += rs_count(c, j);
            }
            memcpy(w, R[q].rbuf, R[q].rbytes);   /* in place: beyond the result stays */
            for (size_t e = 0; e < rs_count(c, q); e++) {
                int32_t sum = 0;
                for (int j = 0; j < P; j++) {
                    sum += input(j, displ + e);
                }
                memcpy(w + e * 4, &sum, 4);
            }
        }
        }
    }
    return want;
}

static void run_cfg(const cfg_t *c, int order)
{
    const int P = c->size;
    rank_t *R = calloc((size_t) P, sizeof(*R));
    size_t *counts = malloc((size_t) P * sizeof(size_t));
    for (int q = 0; q < P; q++) {
        counts[q] = rs_count(c, q);
    }
    unsigned char **want = setup(R, c);
    int is_rs = XCCL_COLL_REDUCE_SCATTER == c->coll || XCCL_COLL_REDUCE_SCATTER_BLOCK == c->coll;
    for (int q = 0; q < P; q++) {
        xccl_stage_args_t a = {
            .coll = c->coll, .rank = q, .size = P,
            .es = (XCCL_COLL_ALLREDUCE == c->coll || is_rs) ? 4 : 1,
            .count = c->count, .counts = counts, .block = c->block, .root = c->root,
            .in_place = c->in_place, .chunk_bytes = c->chunk,
        };
        ck_assert_int_eq(xccl_stage_plan(&R[q].plan, &a), 0);
        ck_assert_int_eq(R[q].plan.nchunks, R[0].plan.nchunks);
        R[q].slot = malloc(R[q].plan.slot_bytes + 1);
    }
    const int K = R[0].plan.nchunks;
    if (0 == order) {
        for (int k = 0; k < K; k++) {
            for (int q = 0; q < P; q++) {
                copy_in(&R[q], c, &R[q].plan.chunks[k]);
            }
            chunk_collective(R, c, k);
            for (int q = 0; q < P; q++) {
                copy_out(&R[q], &R[q].plan.chunks[k]);
            }
        }
    } else {
        /* Every copy in first (one slot per chunk then). */
        unsigned char ***slots = calloc((size_t) P, sizeof(*slots));
        for (int q = 0; q < P; q++) {
            slots[q] = calloc((size_t) K, sizeof(**slots));
            for (int k = 0; k < K; k++) {
                slots[q][k] = malloc(R[q].plan.slot_bytes + 1);
                R[q].slot = slots[q][k];
                copy_in(&R[q], c, &R[q].plan.chunks[k]);
            }
        }
        for (int k = 0; k < K; k++) {
            for (int q = 0; q < P; q++) {
                R[q].slot = slots[q][k];
            }
            chunk_collective(R, c, k);
            for (int q = 0; q < P; q++) {
                copy_out(&R[q], &R[q].plan.chunks[k]);
            }
        }
        for (int q = 0; q < P; q++) {
            for (int k = 0; k < K; k++) {
                free(slots[q][k]);
            }
            free(slots[q]);
            R[q].slot = NULL;
        }
        free(slots);
    }
    for (int q = 0; q < P; q++) {
        size_t cmp = R[q].rbytes;
        if (is_rs && c->in_place) {
            cmp = counts[q] * 4;      /* beyond the result RECV is undefined */
        }
        int bad = -1;
        for (size_t i = 0; i < cmp && bad < 0; i++) {
            if (R[q].rbuf[i] != want[q][i]) {
                bad = (int) i;
            }
        }
        ck_assert_msg(bad < 0,
                      "coll %d P=%d in_place=%d count=%zu block=%zu chunk=%zu order=%d: rank %d "
                      "byte %d wrong (K=%d)",
                      (int) c->coll, P, c->in_place, c->count, c->block, c->chunk, order, q, bad, K);
        xccl_stage_plan_fini(&R[q].plan);
        free(R[q].sbuf);
        free(R[q].rbuf);
        free(R[q].slot);
        free(want[q]);
    }
    free(want);
    free(counts);
    free(R);
}

static const xccl_coll_t colls[] = { XCCL_COLL_ALLREDUCE, XCCL_COLL_BCAST, XCCL_COLL_ALLGATHER,
                                     XCCL_COLL_ALLTOALL, XCCL_COLL_REDUCE_SCATTER,
                                     XCCL_COLL_REDUCE_SCATTER_BLOCK };

START_TEST(test_plans_match_collective)
{
    const xccl_coll_t coll = colls[_i];
    static const int sizes[] = { 1, 2, 3, 4, 7 };
    static const size_t counts[] = { 0, 1, 5, 64, 1001 };
    static const size_t chunks[] = { 1, 7, 64, 4096, 1 << 20 };
    int runs = 0;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            for (size_t ki = 0; ki < sizeof(chunks) / sizeof(chunks[0]); ki++) {
                for (int in_place = 0; in_place <= 1; in_place++) {
                    for (int irregular = 0; irregular <= 1; irregular++) {
                        if (irregular && XCCL_COLL_REDUCE_SCATTER != coll) {
                            continue;
                        }
                        if (in_place && XCCL_COLL_BCAST == coll) {
                            continue;
                        }
                        cfg_t c = { .coll = coll, .size = sizes[si], .in_place = in_place,
                                    .root = sizes[si] - 1, .count = counts[ci],
                                    .block = counts[ci] * 3, .chunk = chunks[ki],
                                    .irregular = irregular };
                        run_cfg(&c, 0);
                        run_cfg(&c, 1);
                        runs++;
                    }
                }
            }
        }
    }
    ck_assert_int_gt(runs, 100);
}
END_TEST

START_TEST(test_chunk_counts)
{
    /* 16 MiB allreduce of floats in 1 MiB chunks: 16 chunks of 1 MiB. */
    xccl_stage_plan_t p;
    xccl_stage_args_t a = { .coll = XCCL_COLL_ALLREDUCE, .rank = 0, .size = 4, .es = 4,
                            .count = 4u << 20, .chunk_bytes = 1u << 20 };
    ck_assert_int_eq(xccl_stage_plan(&p, &a), 0);
    ck_assert_int_eq(p.nchunks, 16);
    ck_assert_uint_eq(p.slot_bytes, 2u << 20);
    xccl_stage_plan_fini(&p);
    /* A chunk never splits an element or a byte: 3 elements, tiny chunks. */
    a.count = 3;
    a.chunk_bytes = 1;
    ck_assert_int_eq(xccl_stage_plan(&p, &a), 0);
    ck_assert_int_eq(p.nchunks, 3);
    xccl_stage_plan_fini(&p);
    /* Irregular in-place reduce_scatter stays one chunk (see xccl_stage.c). */
    size_t counts[3] = { 1000, 10, 0 };
    xccl_stage_args_t r = { .coll = XCCL_COLL_REDUCE_SCATTER, .rank = 1, .size = 3, .es = 4,
                            .counts = counts, .in_place = 1, .chunk_bytes = 64 };
    ck_assert_int_eq(xccl_stage_plan(&p, &r), 0);
    ck_assert_int_eq(p.nchunks, 1);
    xccl_stage_plan_fini(&p);
    r.in_place = 0;
    ck_assert_int_eq(xccl_stage_plan(&p, &r), 0);
    ck_assert_int_gt(p.nchunks, 1);
    xccl_stage_plan_fini(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stage");
    TCase *tc = tcase_create("plans");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_plans_match_collective, 0, (int) (sizeof(colls) / sizeof(colls[0])));
    tcase_add_test(tc, test_chunk_counts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
