/*
 * Copies of at most 64 bytes without a call: loads of 4, 8 or 16 bytes
 * from both ends (overlapping in the middle), all before the stores, so
 * the regions may overlap.  glibc's memcpy of a variable length is a call
 * and a dispatch; the latency path makes several such copies per call.
 */
#ifndef XCCL_COPY_H
#define XCCL_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The first and the last w bytes of [src, src + len), len >= w, loaded
 * before either is stored: together they cover len <= 2 w. */
static inline __attribute__((always_inline)) void xccl_copy_ends(unsigned char *d,
                                                                 const unsigned char *s,
                                                                 size_t len, size_t w)
{
    unsigned char head[32], tail[32];
    memcpy(head, s, w);
    memcpy(tail, s + len - w, w);
    memcpy(d, head, w);
    memcpy(d + len - w, tail, w);
}

static inline __attribute__((always_inline)) void xccl_copy_small(void *dst, const void *src,
                                                                  size_t len)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (len > 32) {
        xccl_copy_ends(d, s, len, 32);
    } else if (len > 16) {
        xccl_copy_ends(d, s, len, 16);
    } else if (len >= 8) {
        xccl_copy_ends(d, s, len, 8);
    } else if (len >= 4) {
        xccl_copy_ends(d, s, len, 4);
    } else if (len > 0) {
        const unsigned char c0 = s[0], c1 = s[len / 2], c2 = s[len - 1];
        d[0] = c0;
        d[len / 2] = c1;
        d[len - 1] = c2;
    }
}

#endif
