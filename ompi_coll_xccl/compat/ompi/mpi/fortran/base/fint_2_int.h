/*
 * Debian's libopenmpi-dev ships ompi/op/op.h, which includes this header,
 * but not the header itself.  op.h only needs OMPI_INT_2_FINT; on this
 * platform MPI_Fint is a C int, so the conversion is the identity.
 */
#ifndef XCCL_COMPAT_FINT_2_INT_H
#define XCCL_COMPAT_FINT_2_INT_H

#define OMPI_INT_2_FINT(a) (a)
#define OMPI_FINT_2_INT(a) (a)

#endif
