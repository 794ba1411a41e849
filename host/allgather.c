/*
 * allgather.c - all-gather and gather, staged and single copy.
 *
 * Staged, each rank stages its block (a gather's root needs not), copies
 * its own block straight from sendbuff to recvbuff, and whoever wants the
 * result copies the others' out; the senders of a gather wait for nobody.
 * Single copy (round one is direct.c's), whoever wants the result reads
 * every peer's sendbuff straight into its recvbuff, starting with the next
 * rank, then waits in round two until its own sendbuff has been read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

/* Each rank stages its block (a gather's root needs not); its own block
 * goes straight from sendbuff to recvbuff; whoever wants the result copies
 * the others' out.  The senders of a gather wait for nobody. */
static ncclResult_t all_gather(ncclComm_t c, const n4p_op *o, bool root_only)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const bool eager = o->count * esz <= N4P_EAGER_BYTES;
    const size_t chunk = eager ? o->count : c->seg.slot_bytes / esz;
    const bool want = !root_only || r == o->root;
    const bool stage = n > 1 && !(root_only && want);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    char *own = recv + (size_t)r * o->count * esz;
    const bool nt = want && n4p_streaming(c, (size_t)n * o->count * esz);
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;
    for (size_t off = 0; off < o->count; off += chunk) {
        const size_t m = part(o->count, off, chunk);
        if ((rc = begin(&rd, eager || !stage)) != ncclSuccess)
            return rc;
        if (stage)
            n4p_copy(eager ? EAGER(r) : SLOT(rd.set, r), send + off * esz, m * esz, false);
        if (want && own != send)
            n4p_copy(own + off * esz, send + off * esz, m * esz, nt);
        if ((rc = end(&rd, want ? N4P_ALL : N4P_NOBODY)) != ncclSuccess)
            return rc;
        if (!want)
            continue;
        for (int k = 0; k < n; k++)
            if (k != r)
                n4p_copy(recv + ((size_t)k * o->count + off) * esz,
                         eager ? EAGER(k) : SLOT(rd.set, k), m * esz, nt);
    }
    return ncclSuccess;
}

ncclResult_t n4p_allgather_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    return all_gather(c, o, false);
}

ncclResult_t n4p_gather_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    (void)rs;
    return all_gather(c, o, true);
}

/* Single copy: rank r (every rank, or a gather's root) reads block k of
 * recvbuff from rank k's sendbuff. */
static ncclResult_t read_blocks(ncclComm_t c, const n4p_op *o, round_t *rd, bool root_only,
                                bool *go)
{
    const int n = c->nranks, r = c->rank;
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const void *const *src = (const void *const *)c->srcs;
    const bool nt = n4p_streaming(c, (size_t)n * blk); /* the output */
    ncclResult_t rc = ncclSuccess;
    int wait = N4P_ALL;
    if (n4p_direct_bounced(c, o, rd->t, root_only ? o->root : N4P_ALL, false)) {
        *go = false;
        return ncclSuccess;
    }
    if (root_only && r != o->root) {
        wait = o->root;
    } else {
        if (root_only)
            wait = N4P_NOBODY;
        if (send != recv + (size_t)r * blk)
            n4p_copy(recv + (size_t)r * blk, send, blk, nt);
        for (int i = 1; i < n && rc == ncclSuccess; i++) {
            int k = (r + i) % n;
            rc = n4p_cma_read(c, k, recv + (size_t)k * blk, n4p_addr(src[k], 0), blk, nt);
        }
    }
    /* round two: hold this rank until the readers of its buffers are done */
    return rc != ncclSuccess ? rc : wait_round(rd, wait);
}

ncclResult_t n4p_allgather_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go)
{
    (void)rs;
    return read_blocks(c, o, rd, false, go);
}

ncclResult_t n4p_gather_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                               round_t *rd, bool *go)
{
    (void)rs;
    return read_blocks(c, o, rd, true, go);
}
