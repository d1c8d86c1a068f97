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

typedef struct {
    uint64_t a, b;
} xccl_copy_16_t;

static inline __attribute__((always_inline)) void xccl_copy_small(void *dst, const void *src,
                                                                  size_t len)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (len > 32) {
        xccl_copy_16_t w0, w1, w2, w3;
        memcpy(&w0, s, 16);
        memcpy(&w1, s + 16, 16);
        memcpy(&w2, s + len - 32, 16);
        memcpy(&w3, s + len - 16, 16);
        memcpy(d, &w0, 16);
        memcpy(d + 16, &w1, 16);
        memcpy(d + len - 32, &w2, 16);
        memcpy(d + len - 16, &w3, 16);
    } else if (len > 16) {
        xccl_copy_16_t w0, w1;
        memcpy(&w0, s, 16);
        memcpy(&w1, s + len - 16, 16);
        memcpy(d, &w0, 16);
        memcpy(d + len - 16, &w1, 16);
    } else if (len >= 8) {
        uint64_t w0, w1;
        memcpy(&w0, s, 8);
        memcpy(&w1, s + len - 8, 8);
        memcpy(d, &w0, 8);
        memcpy(d + len - 8, &w1, 8);
    } else if (len >= 4) {
        uint32_t w0, w1;
        memcpy(&w0, s, 4);
        memcpy(&w1, s + len - 4, 4);
        memcpy(d, &w0, 4);
        memcpy(d + len - 4, &w1, 4);
    } else if (len > 0) {
        const unsigned char c0 = s[0], c1 = s[len / 2], c2 = s[len - 1];
        d[0] = c0;
        d[len / 2] = c1;
        d[len - 1] = c2;
    }
}

#endif
