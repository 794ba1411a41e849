/*
 * allreduce.c - all-reduce, reduce and all-reduce with bias: staged, and
 * the all-reduce's single copy.
 *
 * Staged (the protocol is rounds.c's, the design engine.h's): small
 * all-reduces (<= 64 KiB) take one round in which every rank stages its
 * input and whoever wants the result reduces all of them.  Larger ones
 * pipeline two steps over rounds of one slot: round t stages chunk t (each
 * rank the shares the others reduce), then, after everybody arrived, each
 * rank reduces its 1/nranks share of chunk t into a result slot and copies
 * out the result of chunk t-1.  A reduce is the same with only the root
 * wanting the result; an all-reduce with bias adds the bias after it.
 * Both forms reduce each element in rank order with the same kernel
 * (reduce.c), so all ranks and both paths give bit-identical results.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

#define SMALL_ALLREDUCE (64u << 10)

static ncclResult_t all_reduce(ncclComm_t c, const n4p_op *o,
                               const n4p_redspec *rs, bool root_only)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t bytes = o->count * esz;
    const size_t S = c->seg.slot_bytes;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool want = !root_only || r == o->root;
    const void **srcs = c->srcs;
    const bool nt = want && n4p_streaming(c, bytes);
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc;

    if (bytes <= N4P_EAGER_BYTES || (bytes <= SMALL_ALLREDUCE && bytes <= S)) {
        /* one round: every rank stages its input (a reduce's root needs
         * not), whoever wants the result reduces them all */
        const bool eager = bytes <= N4P_EAGER_BYTES;
        if ((rc = begin(&rd, eager)) != ncclSuccess)
            return rc;
        char *mine = eager ? EAGER(r) : SLOT(rd.set, r);
        if (!(root_only && want))
            n4p_copy(mine, send, bytes, false);
        if ((rc = end(&rd, want ? N4P_ALL : N4P_NOBODY)) != ncclSuccess)
            return rc;
        if (want) {
            for (int k = 0; k < n; k++)
                srcs[k] = k == r ? send : eager ? EAGER(k) : SLOT(rd.set, k);
            n4p_reduce(rs, recv, srcs, n, o->count);
        }
        return ncclSuccess;
    }
    /* Chunks of one slot, in pipelined rounds: round t stages chunk t
     * (every rank copies in the shares the others reduce; its own share is
     * read from sendbuff), then, after everybody arrived, reduces its share
     * of chunk t into the result slot of the next round's set and copies out
     * the result of chunk t-1 from this round's.  Writing the next round's
     * set early is safe: every rank has arrived at this round, so has read
     * everything of the previous one.  One round per chunk, plus one to
     * collect the last result. */
    const size_t chunk = S / esz;
    size_t prev_off = 0, prev_m = 0;
    for (size_t off = 0;; off += chunk) {
        const size_t m = part(o->count, off, chunk);
        size_t lo, hi;
        share(m, r, n, &lo, &hi);
        if ((rc = begin(&rd, false)) != ncclSuccess)
            return rc;
        if (m > 0) {
            char *mine = SLOT(rd.set, r);
            n4p_copy(mine, send + off * esz, lo * esz, false);
            n4p_copy(mine + hi * esz, send + (off + hi) * esz, (m - hi) * esz, false);
        }
        if ((rc = end(&rd, N4P_ALL)) != ncclSuccess)
            return rc;
        if (want && prev_m > 0)
            n4p_copy(recv + prev_off * esz, SLOT(rd.set, n), prev_m * esz, nt);
        if (m == 0)
            break;
        for (int k = 0; k < n; k++)
            srcs[k] = k == r ? send + (off + lo) * esz : SLOT(rd.set, k) + lo * esz;
        n4p_reduce(rs, SLOT(rd.set ^ 1, n) + lo * esz, srcs, n, hi - lo);
        prev_off = off, prev_m = m;
    }
    return ncclSuccess;
}

ncclResult_t n4p_allreduce_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    return all_reduce(c, o, rs, false);
}

ncclResult_t n4p_reduce_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    return all_reduce(c, o, rs, true);
}

ncclResult_t n4p_allreduce_bias_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs)
{
    ncclResult_t rc = all_reduce(c, o, rs, false);
    if (rc == ncclSuccess)
        n4p_add_bias(o->dtype, o->recvbuff, o->acc, o->count);
    return rc;
}

/* The single-copy all-reduce, after round one (rd): a reduce-scatter, then
 * an all-gather, each read straight from the peers' buffers.  Rank r reads
 * its share [lo, hi) of every peer's sendbuff, in chunks, into its own
 * slot (at the source's offset within a page, so that no read lands at a
 * slow distance), and reduces them with its own input, in rank order as
 * the staged form does, into its recvbuff; after a round in which
 * everybody has done so, it reads the peers' shares of the result from
 * their recvbuffs.  Per rank that is 2 (n-1)/n of the message read once,
 * where staging copies (n-1)/n in and all of it out, and no staging slot
 * moves between CPUs.  In place, rank r writes only its share of its
 * buffer while the peers read theirs, and the other shares only after the
 * peers have read them. */
ncclResult_t n4p_allreduce_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go)
{
    (void)go; /* always taken */
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t bytes = o->count * esz;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const n4p_rank_ctl *ranks = c->seg.ranks;
    const uint64_t t = rd->t % N4P_DEPTH; /* round one's descriptions */
    const void **srcs = c->srcs;
    /* every rank has arrived at round one, so nobody reads the slots of
     * the next round's set: this rank's one is scratch until then */
    char *scratch = SLOT((int)((rd->t + 1) & 1), r);
    const size_t region = c->seg.slot_bytes / npeers(n);
    const size_t pad = region >= 2 * (size_t)N4P_PAGE ? N4P_PAGE : 0;
    const size_t chunk = (region - pad) / esz;
    size_t lo, hi;
    ncclResult_t rc = ncclSuccess;
    share(o->count, r, n, &lo, &hi);
    for (size_t off = lo; off < hi && rc == ncclSuccess; off += chunk) {
        const size_t m = part(hi, off, chunk);
        for (int k = 0; k < n && rc == ncclSuccess; k++) {
            if (k == r) {
                srcs[k] = send + off * esz;
                continue;
            }
            const uint64_t from = ranks[k].desc[t].sbuf + off * esz;
            char *at = scratch + peer_pos(k, r) * region;
            if (pad > 0)
                at += (from - (uint64_t)(uintptr_t)at) & (N4P_PAGE - 1);
            srcs[k] = at;
            rc = n4p_cma_read(c, k, at, from, m * esz, false);
        }
        if (rc == ncclSuccess)
            n4p_reduce(rs, recv + off * esz, srcs, n, m);
    }
    if (rc != ncclSuccess || (rc = wait_round(rd, N4P_ALL)) != ncclSuccess)
        return rc;
    const bool nt = n4p_streaming(c, bytes);
    for (int i = 1; i < n && rc == ncclSuccess; i++) {
        const int k = (r + i) % n;
        share(o->count, k, n, &lo, &hi);
        const uint64_t res = ranks[k].desc[t].rbuf;
        if (hi > lo)
            rc = n4p_cma_read(c, k, recv + lo * esz, res + lo * esz, (hi - lo) * esz, nt);
    }
    /* hold this rank until the readers of its result are done */
    return rc != ncclSuccess ? rc : wait_round(rd, N4P_ALL);
}
