/* The names of the collectives, as the MCA parameters, the tuning file and
 * the verbose lines spell them. */
#include "xccl_base.h"

#include <string.h>

static const char *const coll_names[XCCL_NCOLL] = {
    [XCCL_COLL_ALLREDUCE] = "allreduce",
    [XCCL_COLL_ALLGATHER] = "allgather",
    [XCCL_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [XCCL_COLL_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
    [XCCL_COLL_ALLTOALL] = "alltoall",
    [XCCL_COLL_BCAST] = "bcast",
    [XCCL_COLL_REDUCE] = "reduce",
    [XCCL_COLL_BARRIER] = "barrier",
    [XCCL_COLL_ALLGATHERV] = "allgatherv",
    [XCCL_COLL_ALLTOALLV] = "alltoallv",
    [XCCL_COLL_GATHER] = "gather",
    [XCCL_COLL_GATHERV] = "gatherv",
    [XCCL_COLL_SCATTER] = "scatter",
    [XCCL_COLL_SCATTERV] = "scatterv",
};

const char *xccl_coll_name(xccl_coll_t c)
{
    return (int) c >= 0 && c < XCCL_NCOLL ? coll_names[c] : NULL;
}

int xccl_coll_index(const char *name)
{
    for (int i = 0; NULL != name && i < XCCL_NCOLL; i++) {
        if (0 == strcmp(name, coll_names[i])) {
            return i;
        }
    }
    return -1;
}
