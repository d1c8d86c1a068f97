/* Cross-memory attach between the ranks of a node (xccl_cma.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE            /* process_vm_readv */
#endif
#include "xccl_cma.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

int xccl_cma_ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (NULL == f) {
        return -1;
    }
    if (1 != fscanf(f, "%d", &v)) {
        v = -1;
    }
    fclose(f);
    return v;
}

/* process_vm_readv and process_vm_writev take the same arguments: one loop
 * moves len bytes between local and remote either way, past short counts. */
typedef ssize_t (*cma_fn_t)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                            unsigned long, unsigned long);

static int cma_move(cma_fn_t fn, pid_t pid, char *local, uintptr_t remote, size_t len)
{
    while (len > 0) {
        struct iovec l = { local, len }, rv = { (void *) remote, len };
        ssize_t n = fn(pid, &l, 1, &rv, 1, 0);
        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            return -errno;
        }
        if (0 == n) {
            return -EFAULT;
        }
        local += n;
        remote += (uintptr_t) n;
        len -= (size_t) n;
    }
    return 0;
}

int xccl_cma_read(pid_t pid, void *dst, const void *remote, size_t len)
{
    return cma_move(process_vm_readv, pid, dst, (uintptr_t) remote, len);
}

int xccl_cma_write(pid_t pid, void *remote, const void *src, size_t len)
{
    return cma_move(process_vm_writev, pid, (char *) src, (uintptr_t) remote, len);
}

int xccl_cma_probe(const xccl_segment_t *seg, int peer)
{
    if (peer < 0 || peer >= xccl_segment_nranks(seg)) {
        return -EINVAL;
    }
    if (peer == xccl_segment_rank(seg)) {
        return 1;
    }
    /* Scope 3: no process may attach to another, whatever its rights. */
    if (3 == xccl_cma_ptrace_scope()) {
        return 0;
    }
    const pid_t pid = xccl_segment_pid(seg, peer);
    if (0 == pid) {
        return -EAGAIN;        /* not attached yet */
    }
    uint64_t v = 0, addr, expected;
    xccl_segment_probe_word(seg, peer, &addr, &expected);
    if (0 != xccl_cma_read(pid, &v, (const void *) (uintptr_t) addr, sizeof(v))) {
        return 0;
    }
    /* process_vm_writev: the kernel checks the same right as for the
     * read; what may still refuse it is a filter on the system call
     * (seccomp), so it is tried on a word of this process, never on the
     * peer's memory (an address the peer may have freed since). */
    volatile uint64_t w = 0;
    if (0 != xccl_cma_write(getpid(), (void *) &w, &v, sizeof(v)) || w != v) {
        return 0;
    }
    return v == expected;
}
