/*
 * Derived datatypes through Open MPI's convertor.  Ranks may describe the
 * same message with different datatypes of one type signature (MPI_INT on
 * one rank, a vector of MPI_INT on another), so whether xccl runs a call
 * cannot depend on a datatype's layout: a rank whose layout has gaps packs
 * its data into contiguous bytes, the schedule moves those, and it
 * unpacks what arrived.  The convertor handles every datatype Open MPI
 * has; its host memory copies are the datatype engine's, not ours.
 */
#include "ompi_config.h"

#include <sys/uio.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/datatype/opal_convertor.h"

#include "coll_xccl.h"

int mca_coll_xccl_pack(void *dst, size_t bytes, const void *buf, size_t count,
                       struct ompi_datatype_t *dt)
{
    opal_convertor_t conv;
    struct iovec iov = { .iov_base = dst, .iov_len = bytes };
    uint32_t niov = 1;
    size_t max = bytes;
    int rc;

    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super, count,
                                                  buf, 0, &conv);
    if (OPAL_SUCCESS == rc) {
        rc = opal_convertor_pack(&conv, &iov, &niov, &max) < 0 || max != bytes
                 ? OPAL_ERROR : OPAL_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return OPAL_SUCCESS == rc ? MPI_SUCCESS : MPI_ERR_TYPE;
}

int mca_coll_xccl_unpack(void *buf, size_t count, struct ompi_datatype_t *dt, const void *src,
                         size_t bytes)
{
    opal_convertor_t conv;
    struct iovec iov = { .iov_base = (void *) src, .iov_len = bytes };
    uint32_t niov = 1;
    size_t max = bytes;
    int rc;

    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dt->super, count,
                                                  buf, 0, &conv);
    if (OPAL_SUCCESS == rc) {
        rc = opal_convertor_unpack(&conv, &iov, &niov, &max) < 0 || max != bytes
                 ? OPAL_ERROR : OPAL_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    return OPAL_SUCCESS == rc ? MPI_SUCCESS : MPI_ERR_TYPE;
}
