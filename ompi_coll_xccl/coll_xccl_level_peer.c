/* xccl_peer_t over the node's shared segment (coll_xccl_level_peer.h). */
#include "coll_xccl_level_peer.h"
#include "segment/xccl_cma.h"

#include <errno.h>
#include <string.h>

/* The segment rank of group rank q, or -1. */
static int local(const xccl_level_peer_t *p, int q)
{
    if (q < 0 || q >= p->group_size) {
        return -1;
    }
    return p->local_of ? p->local_of[q] : q;
}

static void *shm_buf(void *ctx, int peer, xccl_buf_id_t id)
{
    xccl_level_peer_t *p = ctx;
    const int l = local(p, peer);
    if (l < 0 || (int) id < 0 || id >= XCCL_NBUF || !p->region[id].on) {
        return NULL;
    }
    char *slot = xccl_segment_slot(p->seg, l);
    return slot ? slot + p->region[id].off : NULL;
}

static int shm_post(void *ctx, uint32_t seq, uint32_t val)
{
    xccl_level_peer_t *p = ctx;
    return xccl_segment_flag_post(p->seg, seq, val);
}

static int shm_test(void *ctx, int peer, uint32_t seq, uint32_t val)
{
    xccl_level_peer_t *p = ctx;
    const int l = local(p, peer);
    if (l < 0) {
        return -EINVAL;
    }
    if (xccl_segment_flag_test(p->seg, l, seq, val)) {
        return 1;
    }
    /* Now and then: is the peer still there?  (A killed rank never posts.) */
    if (++p->misses >= XCCL_LEVEL_PEER_LIVENESS_EVERY) {
        p->misses = 0;
        if (0 == xccl_segment_peer_alive(p->seg, l)) {
            p->gone = l;
            return -ESRCH;
        }
    }
    return 0;
}

/* Where group rank peer's buffer id, published for this call, lies at
 * offset off in its process: 0 with *pid and *addr, or <0. */
static int published_at(const xccl_level_peer_t *p, int peer, xccl_buf_id_t id, size_t off, pid_t *pid,
                        uintptr_t *addr)
{
    const int l = local(p, peer);
    uint64_t base;
    if (!p->cma || l < 0 || id >= XCCL_BUF_SLOT) {
        return -EINVAL;
    }
    int rc = xccl_segment_published(p->seg, l, p->seq, (int) id, &base);
    if (rc < 0) {
        return rc;
    }
    *pid = xccl_segment_pid(p->seg, l);
    *addr = (uintptr_t) (base + off);
    return 0;
}

static int shm_read(void *ctx, int peer, xccl_buf_id_t id, size_t off, void *dst, size_t len)
{
    pid_t pid;
    uintptr_t at;
    int rc = published_at(ctx, peer, id, off, &pid, &at);
    return rc < 0 ? rc : xccl_cma_read(pid, dst, (const void *) at, len);
}

static int shm_write(void *ctx, int peer, xccl_buf_id_t id, size_t off, const void *src, size_t len)
{
    pid_t pid;
    uintptr_t at;
    int rc = published_at(ctx, peer, id, off, &pid, &at);
    return rc < 0 ? rc : xccl_cma_write(pid, (void *) at, src, len);
}

void xccl_level_peer_init(xccl_level_peer_t *p, xccl_segment_t *seg, const int *local_of, int group_size)
{
    memset(p, 0, sizeof(*p));
    p->seg = seg;
    p->local_of = local_of;
    p->group_size = group_size;
    p->gone = -1;
    p->region[XCCL_BUF_SLOT].on = 1;
    p->region[XCCL_BUF_SLOT].len = xccl_segment_slot_bytes(seg);
    p->peer.ctx = p;
    p->peer.buf = shm_buf;
    p->peer.post = shm_post;
    p->peer.test = shm_test;
    p->peer.read = NULL;
    p->peer.write = NULL;
}

void xccl_level_peer_cma(xccl_level_peer_t *p, int on)
{
    p->cma = on;
    p->peer.read = on ? shm_read : NULL;
    p->peer.write = on ? shm_write : NULL;
}

int xccl_level_peer_publish(xccl_level_peer_t *p, uint32_t seq, void *const bufs[XCCL_NBUF])
{
    const void *addrs[XCCL_BUF_SLOT];
    for (int b = 0; b < XCCL_BUF_SLOT; b++) {
        addrs[b] = bufs[b];
    }
    p->seq = seq;
    return xccl_segment_publish(p->seg, seq, XCCL_BUF_SLOT, addrs);
}

int xccl_level_peer_map(xccl_level_peer_t *p, xccl_buf_id_t id, size_t off, size_t len)
{
    const size_t slot = xccl_segment_slot_bytes(p->seg);
    if ((int) id < 0 || id >= XCCL_NBUF || off > slot || len > slot - off) {
        return -1;
    }
    p->region[id].off = off;
    p->region[id].len = len;
    p->region[id].on = 1;
    return 0;
}

void *xccl_level_peer_own(const xccl_level_peer_t *p, xccl_buf_id_t id)
{
    if ((int) id < 0 || id >= XCCL_NBUF || !p->region[id].on) {
        return NULL;
    }
    return (char *) xccl_segment_slot(p->seg, xccl_segment_rank(p->seg)) + p->region[id].off;
}

int xccl_level_peer_fits(const xccl_level_peer_t *p, const xccl_sched_t *s)
{
    return s->slot_bytes <= (p->region[XCCL_BUF_SLOT].on ? p->region[XCCL_BUF_SLOT].len : 0);
}
