/*
 * p2p_overlap.h - sends and receives of one group whose buffers overlap
 * (p2p_overlap.c): what group.c refuses, and the copy-on-write of the
 * sources that p2p.c's engine reads through.
 */
#ifndef N4P_HOST_P2P_OVERLAP_H
#define N4P_HOST_P2P_OVERLAP_H

#include "internal.h"

/* Bytes that a send of the group reads and a receive of the group writes.
 * The receive writes them in order, from `lo` up; before it writes a piece,
 * what a send has yet to read of it is copied to the same place in
 * `shadow`.  So a send reads [lo, written) from the shadow and the rest
 * from the caller's memory. */
typedef struct {
    uintptr_t lo, hi;  /* the region's addresses, [lo, hi) */
    uintptr_t written; /* the receive has written [lo, written) */
    char *shadow;      /* the copies, at their offset from lo */
    int first, count;  /* the sends that may read it: order[first .. first+count) */
} n4p_region;

typedef struct {
    const n4p_op *ops;
    n4p_region *regions; /* sorted by address, disjoint */
    int nregions;
    int *order; /* indices of the sends that carry bytes, by source address */
    char *block; /* every region's shadow, allocated before anything moves */
} n4p_shadow;

/* The whole group `ops` (any kinds, several communicators), before any of
 * it runs: ncclInvalidUsage, with the last error naming the two calls, when
 * two receives write overlapping memory or a send reads memory that a
 * receive on another communicator writes. */
ncclResult_t n4p_overlap_check_group(const n4p_op *ops, int nops);

/* The sends and receives of one communicator, before they move anything:
 * the regions where a send's source is a receive's destination, each with
 * room for its copy.  ncclSystemError when that memory cannot be had. */
ncclResult_t n4p_shadow_init(n4p_shadow *s, ncclComm_t comm, const n4p_op *ops, int nops);
void n4p_shadow_free(n4p_shadow *s);

/* A receive is about to write [dst, dst + len): save first what the sends
 * still need of it. */
void n4p_shadow_before_write(n4p_shadow *s, const void *dst, size_t len);

/* Where a send reads the first bytes of [src, src + len): the caller's
 * memory or a saved copy; *piece (> 0) bytes are contiguous there. */
const char *n4p_shadow_source(const n4p_shadow *s, const char *src, size_t len,
                              size_t *piece);

#endif
