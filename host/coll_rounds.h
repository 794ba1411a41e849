/*
 * coll_rounds.h - what the staged collectives (collectives.c) and the
 * single-copy ones (direct.c) share: building a round (rounds.c) and the
 * arithmetic of pieces and shares.
 */
#ifndef N4P_HOST_COLL_ROUNDS_H
#define N4P_HOST_COLL_ROUNDS_H

#include "internal.h"

#define SLOT(set, k) ((char *)n4p_slot(c, (set), (k)))

/* One round being built (rounds.c): the collective's description goes with
 * its first round. */
typedef struct {
    ncclComm_t c;
    const n4p_op *o; /* until the first round has been closed */
    uint64_t t;      /* the round */
    int set;         /* the slot set it writes: t & 1 */
} round_t;

/* Begin a round that writes the eager entries (or nothing), or else the
 * next set of staging slots. */
static inline ncclResult_t begin(round_t *rd, bool eager)
{
    rd->t = rd->c->epoch;
    rd->set = (int)(rd->t & 1);
    return n4p_round_open(rd->c, rd->o, eager ? N4P_REUSE_EAGER : N4P_REUSE_SETS,
                          N4P_DIRECT_NO);
}

/* Arrive; wait for `from` (a rank, N4P_ALL or N4P_NOBODY). */
static inline ncclResult_t end(round_t *rd, int from)
{
    bool check = rd->o != NULL;
    rd->o = NULL;
    return n4p_round_close(rd->c, check, from);
}

/* A round that writes nothing: arrive, wait for `from` (a rank, N4P_ALL or
 * N4P_NOBODY). */
static inline ncclResult_t wait_round(round_t *rd, int from)
{
    ncclResult_t rc = begin(rd, true);
    return rc != ncclSuccess ? rc : end(rd, from);
}

/* Where the piece a rank `src` stages for rank `dst` sits in src's slot
 * when the slot holds one piece per peer and none for src itself. */
static inline size_t peer_pos(int dst, int src)
{
    return (size_t)(dst < src ? dst : dst - 1);
}

/* Pieces per slot when a slot holds one piece per peer. */
static inline size_t npeers(int n)
{
    return n > 1 ? (size_t)n - 1 : 1;
}

/* The length of the piece that starts at `off` of `total` in pieces of
 * `piece`: min(piece, total - off), and 0 from the end on. */
static inline size_t part(size_t total, size_t off, size_t piece)
{
    return off < total ? (total - off < piece ? total - off : piece) : 0;
}

/* The share [*lo, *hi) of m elements that rank k reduces. */
static inline void share(size_t m, int k, int n, size_t *lo, size_t *hi)
{
    *lo = m * (size_t)k / (size_t)n;
    *hi = m * (size_t)(k + 1) / (size_t)n;
}

#endif /* N4P_HOST_COLL_ROUNDS_H */
