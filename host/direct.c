/*
 * direct.c - the rounds of the single-copy collectives (the transfers are
 * cma.c's, the choice of path policy.c's, each collective's reads its
 * engine's: allreduce.c, broadcast.c, allgather.c, alltoall.c).
 *
 * Large all-reduces, all-gathers, gathers, all-to-alls and broadcasts read
 * the peers' buffers directly when every rank can (cma.c): round one
 * publishes the buffers and waits for everybody, then each rank reads what
 * it needs straight into recvbuff, then round two holds the owners of
 * buffers that are read until their readers are done; an all-reduce takes
 * a third round (allreduce.c).  Peers are read starting with the next
 * rank, so that they are not all read by everybody at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

/* Whether a read of an all-gather, gather or all-to-all would go through
 * cma.c's bounce buffer (its destination a few bytes after its source
 * modulo 4 KiB).  Staging copies every byte twice too, but without the
 * system calls and page pinning, and is then the faster (two ranks, 16
 * MiB: 7-13% less time).  Every rank decides alike, from the buffers all
 * of them published in round one. */
bool n4p_direct_bounced(ncclComm_t c, const n4p_op *o, uint64_t round, int reader,
                        bool at_rank)
{
    const uint64_t t = round % N4P_DEPTH;
    const uint64_t blk = o->count * n4p_dtype_size(o->dtype);
    bool slow = false;
    for (int r = 0; r < c->nranks && !slow; r++) {
        if (reader != N4P_ALL && r != reader)
            continue;
        const uint64_t rbuf = c->seg.ranks[r].desc[t].rbuf;
        const uint64_t at = at_rank ? (uint64_t)r * blk : 0;
        for (int k = 0; k < c->nranks && !slow; k++)
            slow = k != r &&
                   n4p_slow_distance(rbuf + (uint64_t)k * blk, c->seg.ranks[k].desc[t].sbuf + at);
    }
    if (slow && !c->said_bounced)
        n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: %s staged, not "
                "single-copy: a read would land 1-63 bytes after its source modulo 4 KiB, "
                "which the kernel copies slowly (reported once per communicator)",
                (void *)c, c->rank, c->nranks, c->cur_op);
    if (slow)
        c->said_bounced = true;
    return slow;
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
    *go = true;
    return ncclSuccess;
}

ncclResult_t n4p_direct_run(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs, int choice,
                            n4p_direct_fn engine, bool *done)
{
    round_t rd = {c, o, 0, 0};
    ncclResult_t rc = direct_open(&rd, choice, done);
    if (rc != ncclSuccess || !*done)
        return rc;
    return engine(c, o, rs, &rd, done);
}
