/*
 * broadcast.c - broadcast, staged and single copy.
 *
 * Staged, the root stages the message and the others copy it out; the
 * root waits for nobody.  Single copy (round one is direct.c's), the
 * receivers read the message from the root's sendbuff, and the root, which
 * would otherwise idle while they read, writes the last 1/nranks of it
 * (whole pages: n4p_cma_push_bytes) into every receiver's recvbuff with
 * process_vm_writev; a receiver returns once the root has written.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

/* The root stages the data, the others copy it out.  The root waits for
 * nobody: it goes on (to the next chunk, or the next call) while the others
 * copy.  Small messages go through the root's eager entry, large ones in
 * chunks of the whole slot set.  An out-of-place root copies each chunk to
 * its receive buffer while it is still in its cache. */
ncclResult_t n4p_broadcast_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    const int n = c->nranks, r = c->rank, root = o->root;
    const size_t bytes = o->count * n4p_dtype_size(o->dtype);
    const bool eager = bytes <= N4P_EAGER_BYTES;
    const size_t span = eager ? bytes : (size_t)(n + 1) * c->seg.slot_bytes;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool nt = n4p_streaming(c, bytes);
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;
    for (size_t off = 0; off < bytes; off += span) {
        const size_t m = part(bytes, off, span);
        if (r == root) {
            if ((rc = begin(&rd, eager)) != ncclSuccess)
                return rc;
            n4p_copy(eager ? EAGER(r) : SLOT(rd.set, 0), send + off, m, false);
            if (send != recv)
                n4p_copy(recv + off, send + off, m, nt);
            if ((rc = end(&rd, N4P_NOBODY)) != ncclSuccess)
                return rc;
        } else {
            if ((rc = wait_round(&rd, root)) != ncclSuccess)
                return rc;
            n4p_copy(recv + off, eager ? EAGER(root) : SLOT(rd.set, 0), m, nt);
        }
    }
    return ncclSuccess;
}

ncclResult_t n4p_broadcast_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go)
{
    const int n = c->nranks, r = c->rank;
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const void *const *src = (const void *const *)c->srcs;
    ncclResult_t rc = ncclSuccess;
    int wait = N4P_ALL;
    (void)rs;
    (void)go; /* always taken */
    /* the root writes the tail of the message into every receiver, which
     * reads the rest and waits for the root's writes */
    const size_t tail = n4p_cma_push_bytes(c, blk);
    if (r == o->root) {
        for (int i = 1; i < n && rc == ncclSuccess && tail > 0; i++) {
            int k = (r + i) % n;
            uint64_t dst = c->seg.ranks[k].desc[rd->t % N4P_DEPTH].rbuf;
            rc = n4p_cma_write(c, k, dst + (blk - tail), send + (blk - tail), tail);
        }
        if (rc == ncclSuccess && send != recv)
            n4p_copy(recv, send, blk, n4p_streaming(c, blk));
    } else {
        rc = n4p_cma_read(c, o->root, recv, n4p_addr(src[o->root], 0), blk - tail,
                          n4p_streaming(c, blk));
        wait = tail > 0 ? o->root : N4P_NOBODY;
    }
    /* round two: hold this rank until the readers of its buffers are done */
    return rc != ncclSuccess ? rc : wait_round(rd, wait);
}
