/*
 * Packed copies of buffers whose datatype has gaps (coll_xccl_pack.c).
 */
#ifndef MCA_COLL_XCCL_PACK_H
#define MCA_COLL_XCCL_PACK_H

#include "coll_xccl_call.h"

BEGIN_C_DECLS

/* A rank's side of a call whose datatype has gaps: the schedule runs on
 * contiguous copies, packed before it starts and unpacked after it ends;
 * or, for a user op, on copies of the datatype's layout (layout). */
typedef struct {
    void *s, *r;                     /* the copies, or NULL */
    void *rbuf;                      /* where r goes back to, or NULL */
    size_t rcount, rbytes;
    struct ompi_datatype_t *rdt;
    int layout;                      /* r is in rdt's layout, not packed */
} mca_coll_xccl_packed_t;

struct mca_coll_xccl_gpu_stage;
/* The buffers the schedule of c runs on, from s and r (the user's, or host
 * copies of device buffers: stage, whose data is then copied in first
 * wherever packing reads it): *ws and *wr, copies in pk where the
 * datatypes have gaps.  MPI error codes (logged); pk is released then. */
int mca_coll_xccl_work_buffers(mca_coll_xccl_call_t *c, const void *s, void *r,
                               struct mca_coll_xccl_gpu_stage *stage, mca_coll_xccl_packed_t *pk,
                               char **ws, char **wr);
/* A nonblocking call keeps pk (its datatype retained). */
void mca_coll_xccl_packed_keep(mca_coll_xccl_packed_t *pk);
/* Unpacks what arrived (ok: the schedule succeeded), frees the copies;
 * kept: mca_coll_xccl_packed_keep was called. */
int mca_coll_xccl_packed_end(mca_coll_xccl_module_t *m, xccl_coll_t coll,
                             mca_coll_xccl_packed_t *pk, int ok, int kept);
/* Open MPI's convertor between a datatype's layout and packed bytes: 0 or
 * an MPI error code. */
int mca_coll_xccl_pack(void *dst, size_t bytes, const void *buf, size_t count,
                       struct ompi_datatype_t *dt);
int mca_coll_xccl_unpack(void *buf, size_t count, struct ompi_datatype_t *dt, const void *src,
                         size_t bytes);

END_C_DECLS

#endif
