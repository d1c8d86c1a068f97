/*
 * xccl_cma: cross-memory attach (CMA) between the ranks of a node:
 * process_vm_readv/writev, single-copy for large messages where the kernel
 * allows it (it needs PTRACE_MODE_ATTACH: Yama ptrace_scope 0, or
 * CAP_SYS_PTRACE; scope 1 only for descendants).  xccl_cma_probe tries a
 * real read of a peer's word published in the node's segment
 * (segment/xccl_segment.h) and a write (process_vm_writev) of this
 * process's own memory.  No MPI, no algorithms.
 *
 * Functions return 0 (or a count) or a negative errno.
 */
#ifndef XCCL_CMA_H
#define XCCL_CMA_H

#include <stddef.h>
#include <sys/types.h>

#include "xccl_segment.h"

#ifdef __cplusplus
extern "C" {
#endif

/* /proc/sys/kernel/yama/ptrace_scope, or -1 where there is no Yama. */
int xccl_cma_ptrace_scope(void);
/* 1: process_vm_readv of rank peer's memory works from here (a real read
 * of a word the peer published in the segment), and so does
 * process_vm_writev (tried on this process's memory: the kernel checks the
 * same right for both); 0: refused (ptrace scope, capabilities, seccomp,
 * another namespace), <0: bad argument. */
int xccl_cma_probe(const xccl_segment_t *seg, int peer);
/* Copies len bytes at remote in process pid to local dst (process_vm_readv,
 * partial transfers continued): 0 or -errno. */
int xccl_cma_read(pid_t pid, void *dst, const void *remote, size_t len);
/* Copies len bytes from local src to remote in process pid: 0 or -errno. */
int xccl_cma_write(pid_t pid, void *remote, const void *src, size_t len);

#ifdef __cplusplus
}
#endif

#endif
