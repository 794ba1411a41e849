/*
 * direct.c - the single-copy forms of the collectives (the design is at
 * the top of collectives.c; the transfers and the choice of path are
 * cma.c's, the measurements tune.c's).
 *
 * Large all-gathers, gathers, all-to-alls and broadcasts read the peers'
 * buffers directly when every rank can (cma.c): round one publishes the
 * buffers and waits for everybody, then each rank reads what it needs
 * straight into recvbuff, then round two holds the owners of buffers that
 * are read until their readers are done; an all-reduce takes a third round
 * (direct_all_reduce).  Peers are read starting with the next rank, so
 * that they are not all read by everybody at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "coll_rounds.h"

/* Whether a read of an all-gather, gather or all-to-all would go through
 * cma.c's bounce buffer (its destination a few bytes after its source
 * modulo 4 KiB).  Staging copies every byte twice too, but without the
 * system calls and page pinning, and is then the faster (two ranks, 16
 * MiB: 7-13% less time).  Every rank decides alike, from the buffers all
 * of them published in round t. */
static bool bounced_reads(ncclComm_t c, const n4p_op *o, uint64_t t)
{
    if (o->kind != N4P_K_ALLGATHER && o->kind != N4P_K_GATHER && o->kind != N4P_K_ALLTOALL)
        return false;
    const uint64_t blk = o->count * n4p_dtype_size(o->dtype);
    for (int r = 0; r < c->nranks; r++) {
        if (o->kind == N4P_K_GATHER && r != o->root)
            continue;
        const uint64_t rbuf = c->seg.ranks[r].desc[t % N4P_DEPTH].rbuf;
        const uint64_t at = o->kind == N4P_K_ALLTOALL ? (uint64_t)r * blk : 0;
        for (int k = 0; k < c->nranks; k++)
            if (k != r &&
                n4p_slow_distance(rbuf + (uint64_t)k * blk, c->seg.ranks[k].desc[t % N4P_DEPTH].sbuf + at))
                return true;
    }
    return false;
}

/* Round one; *go tells whether every rank takes part.  The peers'
 * sendbuff addresses are left in c->srcs. */
static ncclResult_t direct_open(round_t *rd, int choice, bool *go)
{
    ncclComm_t c = rd->c;
    const n4p_op *o = rd->o;
    ncclResult_t rc;
    *go = false;
    rd->t = c->epoch;
    if ((rc = n4p_round_open(c, o, N4P_REUSE_EAGER, choice)) != ncclSuccess ||
        (rc = end(rd, N4P_ALL)) != ncclSuccess)
        return rc;
    for (int k = 0; k < c->nranks; k++) {
        const n4p_desc *p = &c->seg.ranks[k].desc[rd->t % N4P_DEPTH];
        if (p->direct != N4P_DIRECT_OK)
            return ncclSuccess;
        c->srcs[k] = (const void *)(uintptr_t)p->sbuf;
    }
    if (bounced_reads(c, o, rd->t)) {
        if (!c->said_bounced)
            n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: %s staged, not "
                    "single-copy: a read would land 1-63 bytes after its source modulo 4 KiB, "
                    "which the kernel copies slowly (reported once per communicator)",
                    (void *)c, c->rank, c->nranks, c->cur_op);
        c->said_bounced = true;
        return ncclSuccess;
    }
    *go = true;
    return ncclSuccess;
}

static inline uint64_t addr(const void *p, size_t off)
{
    return (uint64_t)(uintptr_t)p + off;
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
static ncclResult_t direct_all_reduce(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                      round_t *rd)
{
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

static ncclResult_t direct_run(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                               int choice, bool *go)
{
    const int n = c->nranks, r = c->rank;
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc = direct_open(&rd, choice, go);
    if (rc != ncclSuccess || !*go)
        return rc;
    if (o->kind == N4P_K_ALLREDUCE)
        return direct_all_reduce(c, o, rs, &rd);
    const void *const *src = (const void *const *)c->srcs;
    const bool nt = n4p_streaming(c, (size_t)n * blk); /* an all-gather's or all-to-all's output */
    int wait = N4P_ALL;
    switch (o->kind) {
    case N4P_K_BROADCAST: {
        /* the root writes the tail of the message into every receiver,
         * which reads the rest and waits for the root's writes */
        const size_t tail = n4p_cma_push_bytes(c, blk);
        if (r == o->root) {
            for (int i = 1; i < n && rc == ncclSuccess && tail > 0; i++) {
                int k = (r + i) % n;
                uint64_t dst = c->seg.ranks[k].desc[rd.t % N4P_DEPTH].rbuf;
                rc = n4p_cma_write(c, k, dst + (blk - tail), send + (blk - tail), tail);
            }
            if (rc == ncclSuccess && send != recv)
                n4p_copy(recv, send, blk, n4p_streaming(c, blk));
        } else {
            rc = n4p_cma_read(c, o->root, recv, addr(src[o->root], 0), blk - tail,
                              n4p_streaming(c, blk));
            wait = tail > 0 ? o->root : N4P_NOBODY;
        }
        break;
    }
    case N4P_K_ALLGATHER:
    case N4P_K_GATHER:
        if (o->kind == N4P_K_GATHER && r != o->root) {
            wait = o->root;
            break;
        }
        if (o->kind == N4P_K_GATHER)
            wait = N4P_NOBODY;
        if (send != recv + (size_t)r * blk)
            n4p_copy(recv + (size_t)r * blk, send, blk, nt);
        for (int i = 1; i < n && rc == ncclSuccess; i++) {
            int k = (r + i) % n;
            rc = n4p_cma_read(c, k, recv + (size_t)k * blk, addr(src[k], 0), blk, nt);
        }
        break;
    case N4P_K_ALLTOALL:
        n4p_copy(recv + (size_t)r * blk, send + (size_t)r * blk, blk, nt);
        for (int i = 1; i < n && rc == ncclSuccess; i++) {
            int k = (r + i) % n;
            rc = n4p_cma_read(c, k, recv + (size_t)k * blk, addr(src[k], (size_t)r * blk), blk,
                              nt);
        }
        break;
    default:
        return n4p_fail(c, ncclInternalError, "no single-copy form of %s", c->cur_op);
    }
    /* round two: hold this rank until the readers of its buffers are done */
    return rc != ncclSuccess ? rc : wait_round(&rd, wait);
}

/* The single-copy form of the call when it has one and it applies (*done),
 * else nothing. */
ncclResult_t n4p_single_copy(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                             bool *done)
{
    const size_t n = (size_t)c->nranks;
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    const bool root = c->rank == o->root;
    size_t sbytes = blk, rbytes = blk;
    switch (o->kind) {
    case N4P_K_BROADCAST:
        sbytes = root ? blk : 0;
        break;
    case N4P_K_ALLGATHER:
        rbytes = n * blk;
        break;
    case N4P_K_GATHER:
        rbytes = root ? n * blk : 0;
        break;
    case N4P_K_ALLTOALL:
        sbytes = rbytes = n * blk;
        break;
    case N4P_K_ALLREDUCE:
        break;
    default:
        *done = false;
        return ncclSuccess;
    }
    int choice = n4p_direct_choice(c, o->kind, blk, o->sendbuff, o->recvbuff, sbytes, rbytes);
    if (n4p_tuned(c, o->kind, choice)) {
        int path;
        ncclResult_t rc = n4p_tune_pick(c, o, blk, &path);
        if (rc != ncclSuccess)
            return rc;
        if (path == N4P_PATH_STAGED)
            choice = N4P_DIRECT_NO;
    }
    if (choice == N4P_DIRECT_NO) {
        *done = false;
        return ncclSuccess;
    }
    return direct_run(c, o, rs, choice, done);
}
