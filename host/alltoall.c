/*
 * alltoall.c - all-to-all and all-to-all-v: staged, and the all-to-all's
 * single copy.
 *
 * Staged, the all-to-all is a pairwise exchange (engine.h): each rank
 * stages one piece per peer and copies its own block straight from
 * sendbuff to recvbuff.  The all-to-all-v first publishes every rank's
 * counts, so that all ranks check every pair and agree on the number of
 * rounds.  Single copy (round one is direct.c's), each rank reads its
 * block of every peer's sendbuff straight into its recvbuff.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "engine.h"

/* Each rank stages one piece per peer; its own block goes straight from
 * sendbuff to recvbuff. */
ncclResult_t n4p_alltoall_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    const int n = c->nranks, r = c->rank;
    const pairwise_t p = pairwise(c, o);
    const size_t esz = p.esz, cnt = p.cnt;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool nt = n4p_streaming(c, (size_t)n * cnt * esz);
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;
    for (size_t off = 0; off < cnt; off += p.piece) {
        const size_t m = part(cnt, off, p.piece);
        if ((rc = stage_pairwise(&rd, &p, send, off, m)) != ncclSuccess)
            return rc;
        size_t own = ((size_t)r * cnt + off) * esz;
        if (send != recv)
            n4p_copy(recv + own, send + own, m * esz, nt);
        if ((rc = end(&rd, N4P_ALL)) != ncclSuccess)
            return rc;
        for (int s = 0; s < n; s++)
            if (s != r)
                n4p_copy(recv + ((size_t)s * cnt + off) * esz, staged_pairwise(&rd, &p, s, m),
                         m * esz, nt);
    }
    return ncclSuccess;
}

/* Round 0 checks the counts of every pair; then rounds of one slot, in
 * which each rank stages a piece for every peer. */
ncclResult_t n4p_alltoallv_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    const int n = c->nranks, r = c->rank;
    const size_t nn = (size_t)n;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t *scount = o->v, *sdispl = o->v + nn;
    const size_t *rcount = o->v + 2 * nn, *rdispl = o->v + 3 * nn;
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;

    /* Round 0: everybody publishes its send and receive counts, so that all
     * ranks check every pair and agree on the number of data rounds. */
    if ((rc = begin(&rd, false)) != ncclSuccess)
        return rc;
    memcpy(SLOT(rd.set, r), scount, nn * sizeof(size_t));
    memcpy(SLOT(rd.set, r) + nn * sizeof(size_t), rcount, nn * sizeof(size_t));
    if ((rc = end(&rd, N4P_ALL)) != ncclSuccess)
        return rc;
    size_t maxc = 0;
    for (int s = 0; s < n; s++) {
        const size_t *ps = (const size_t *)SLOT(rd.set, s);
        for (int d = 0; d < n; d++) {
            const size_t *pd = (const size_t *)SLOT(rd.set, d) + nn;
            if (ps[d] != pd[s]) {
                n4p_set_error(c,
                              "ncclAllToAllv count mismatch: rank %d sends %zu "
                              "elements to rank %d, which expects %zu",
                              s, ps[d], d, pd[s]);
                return n4p_comm_failed(c, ncclInvalidUsage);
            }
            if (ps[d] > maxc)
                maxc = ps[d];
        }
    }
    const size_t piece = c->seg.slot_bytes / (nn * esz);
    for (size_t off = 0; off < maxc; off += piece) {
        if ((rc = begin(&rd, false)) != ncclSuccess)
            return rc;
        for (int d = 0; d < n; d++) {
            const size_t len = part(scount[d], off, piece);
            n4p_copy(SLOT(rd.set, r) + (size_t)d * piece * esz,
                     (const char *)o->sendbuff + (sdispl[d] + off) * esz, len * esz, false);
        }
        if ((rc = end(&rd, N4P_ALL)) != ncclSuccess)
            return rc;
        for (int s = 0; s < n; s++) {
            const size_t len = part(rcount[s], off, piece);
            n4p_copy((char *)o->recvbuff + (rdispl[s] + off) * esz,
                     SLOT(rd.set, s) + (size_t)r * piece * esz, len * esz, false);
        }
    }
    return ncclSuccess;
}

ncclResult_t n4p_alltoall_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                 round_t *rd, bool *go)
{
    const int n = c->nranks, r = c->rank;
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const void *const *src = (const void *const *)c->srcs;
    const bool nt = n4p_streaming(c, (size_t)n * blk); /* the output */
    ncclResult_t rc = ncclSuccess;
    (void)rs;
    if (n4p_direct_bounced(c, o, rd->t, N4P_ALL, true)) {
        *go = false;
        return ncclSuccess;
    }
    n4p_copy(recv + (size_t)r * blk, send + (size_t)r * blk, blk, nt);
    for (int i = 1; i < n && rc == ncclSuccess; i++) {
        int k = (r + i) % n;
        rc = n4p_cma_read(c, k, recv + (size_t)k * blk, n4p_addr(src[k], (size_t)r * blk), blk,
                          nt);
    }
    /* round two: hold this rank until the readers of its buffers are done */
    return rc != ncclSuccess ? rc : wait_round(rd, N4P_ALL);
}
