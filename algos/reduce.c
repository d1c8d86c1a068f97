/* STUB: to be written */
#include "xccl_build.h"

int xccl_build_reduce_binomial(xccl_sched_t *s, size_t count, int root, int in_place)
{
    (void) s;
    (void) count;
    (void) root;
    (void) in_place;
    return -1;
}

int xccl_build_reduce_rabenseifner(xccl_sched_t *s, size_t count, int root, int in_place)
{
    (void) s;
    (void) count;
    (void) root;
    (void) in_place;
    return -1;
}

int xccl_build_reduce_chain(xccl_sched_t *s, size_t count, int root, int in_place, size_t seg)
{
    (void) s;
    (void) count;
    (void) root;
    (void) in_place;
    (void) seg;
    return -1;
}

