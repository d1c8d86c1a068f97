/* STUB: to be written */
#include "xccl_build.h"

int xccl_build_gather_binomial(xccl_sched_t *s, size_t block, int root, int in_place)
{
    (void) s;
    (void) block;
    (void) root;
    (void) in_place;
    return -1;
}

int xccl_build_gather_linear(xccl_sched_t *s, size_t block, int root, int in_place)
{
    (void) s;
    (void) block;
    (void) root;
    (void) in_place;
    return -1;
}

int xccl_build_gatherv_linear(xccl_sched_t *s, const size_t *bytes, const size_t *displs, int root, int in_place)
{
    (void) s;
    (void) bytes;
    (void) displs;
    (void) root;
    (void) in_place;
    return -1;
}

