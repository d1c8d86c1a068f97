/*
 * The persistent collectives' names for xccl_bench and the MPI test
 * programs: Open MPI 4.1 has them as MPIX_<Coll>_init (the pcollreq
 * extension, mpi-ext.h); Open MPI 5 has MPI-4's MPI_<Coll>_init in mpi.h
 * (while its MPI_VERSION is still 3).  XCCL_MPI_HAVE_PERSIST: 1 where
 * this MPI has them under either name.  Include after mpi.h.
 */
#ifndef XCCL_MPI_PNAMES_H
#define XCCL_MPI_PNAMES_H

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define XCCL_MPI_HAVE_PERSIST 1
#define MPI_Allreduce_init MPIX_Allreduce_init
#define MPI_Allgather_init MPIX_Allgather_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define MPI_Bcast_init MPIX_Bcast_init
#define MPI_Reduce_init MPIX_Reduce_init
#define MPI_Barrier_init MPIX_Barrier_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define MPI_Gather_init MPIX_Gather_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define MPI_Scatter_init MPIX_Scatter_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#elif MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define XCCL_MPI_HAVE_PERSIST 1
#else
#define XCCL_MPI_HAVE_PERSIST 0
#endif

#endif
