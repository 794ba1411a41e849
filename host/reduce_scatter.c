/*
 * reduce_scatter.c - reduce-scatter, staged: a pairwise exchange (engine.h)
 * in which each rank reduces its block of every rank's input, reading its
 * own piece from sendbuff, in rank order with the kernels of reduce.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

/* Each rank stages the pieces the others reduce (one per peer); it reads
 * its own piece from sendbuff. */
ncclResult_t n4p_reduce_scatter_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    const int n = c->nranks, r = c->rank;
    const pairwise_t p = pairwise(c, o);
    const size_t esz = p.esz, cnt = p.cnt;
    const char *send = o->sendbuff;
    const void **srcs = c->srcs;
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;
    for (size_t off = 0; off < cnt; off += p.piece) {
        const size_t m = part(cnt, off, p.piece);
        if ((rc = stage_pairwise(&rd, &p, send, off, m)) != ncclSuccess ||
            (rc = end(&rd, N4P_ALL)) != ncclSuccess)
            return rc;
        for (int k = 0; k < n; k++)
            srcs[k] = k == r ? send + ((size_t)r * cnt + off) * esz
                             : staged_pairwise(&rd, &p, k, m);
        n4p_reduce(rs, (char *)o->recvbuff + off * esz, srcs, n, m);
    }
    return ncclSuccess;
}
