/*
 * scatter.c - scatter, staged: the root stages one piece per peer and
 * waits for nobody; every other rank copies its piece out.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

/* The root stages one piece per peer and copies its own; it waits for
 * nobody.  The others copy their piece out. */
ncclResult_t n4p_scatter_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    const int n = c->nranks, r = c->rank, root = o->root;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t cnt = o->count;
    const bool eager = npeers(n) * cnt * esz <= N4P_EAGER_BYTES;
    const size_t piece = eager ? cnt : c->seg.slot_bytes / (npeers(n) * esz);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;
    for (size_t off = 0; off < cnt; off += piece) {
        const size_t m = part(cnt, off, piece);
        if (r == root) {
            if ((rc = begin(&rd, eager)) != ncclSuccess)
                return rc;
            char *mine = eager ? EAGER(r) : SLOT(rd.set, r);
            for (int d = 0; d < n; d++)
                if (d != r)
                    n4p_copy(mine + peer_pos(d, r) * m * esz,
                             send + ((size_t)d * cnt + off) * esz, m * esz, false);
            const char *own = send + ((size_t)r * cnt + off) * esz;
            if (own != recv + off * esz)
                n4p_copy(recv + off * esz, own, m * esz, false);
            if ((rc = end(&rd, N4P_NOBODY)) != ncclSuccess)
                return rc;
        } else {
            if ((rc = wait_round(&rd, root)) != ncclSuccess)
                return rc;
            n4p_copy(recv + off * esz,
                     (eager ? EAGER(root) : SLOT(rd.set, root)) + peer_pos(r, root) * m * esz,
                     m * esz, false);
        }
    }
    return ncclSuccess;
}
