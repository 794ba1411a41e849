/*
 * rounds.c - the round protocol of the collectives: who may write which
 * staging buffer when, arriving, and checking that the ranks agree.
 *
 * A collective is one or more rounds, numbered alike on every rank (the
 * ranks call the collectives of a communicator in the same order).  In
 * round t a rank writes what its peers need into buffers of the segment,
 * then arrives: it stores t + 1 in its `seq` (release), which publishes
 * those writes.  A rank that needs data of round t from rank p waits until
 * p's seq >= t + 1 (n4p_wait_arrived, sync.c).  Which ranks a rank waits
 * for depends on the collective: everybody (all-reduce, all-gather, ...),
 * only the root (the receivers of a broadcast or scatter), or nobody (the
 * root of a broadcast, the senders of a reduce or gather): those ranks go
 * on at once and may run ahead.
 *
 * A rank reads the data of round t before it arrives at round t + 1, so
 * "every rank's seq >= u + 2" means everything written in round u has been
 * read.  Buffers are therefore reused by distance: the two sets of staging
 * slots alternate by round parity, so round t may write its set once every
 * rank's seq >= t; the N4P_DEPTH eager entries of a rank (the data of small
 * collectives) and its ring of call descriptions are indexed by round
 * modulo N4P_DEPTH, so round t may write them once every rank's seq >=
 * t + 2 - N4P_DEPTH.  n4p_round_open() waits for that before a rank writes
 * anything; it is usually known already (`seen_all`), since every round
 * that waits for everybody proves it.  So a rank runs at most N4P_DEPTH - 2
 * small rounds (or one staged round) ahead of the slowest rank.
 *
 * Checking.  In the first round of each collective every rank publishes
 * (kind, count, type, the caller's tag, op, root, round) in its description ring, and
 * compares the descriptions of the ranks it waits for with its own, so
 * mismatched calls fail with ncclInvalidUsage instead of corrupting data.
 * A rank that waits for nobody learns of a mismatch through the poison that
 * the others leave, at the end of the call when it is there by then
 * (n4p_check_call_outcome), else at its next call.  Where every rank waits for nobody
 * (each rank the root of its own broadcast, a broadcast's root against a
 * reduce's sender), nobody compares that round; so each description also
 * carries a hash chained over all the descriptions of the communicator so
 * far (`chain`), and the next comparison, in any later collective, finds
 * that the sequences differ.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>

#include "gen/enum_names.h"
#include "transport.h"

void *n4p_eager(ncclComm_t c, int k, uint64_t round)
{
    return c->seg.eager +
           ((size_t)k * N4P_DEPTH + (size_t)(round % N4P_DEPTH)) * N4P_EAGER_BYTES;
}

/* splitmix64's finaliser: every bit of x moves about half of the result. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* `prev` extended by the fields of `d` that every rank must agree on (kind,
 * type and op are small; root is below nranks, or -1). */
static uint64_t chain(uint64_t prev, const n4p_desc *d)
{
    const uint64_t small = (uint64_t)(uint32_t)d->root << 32 |
                           (uint64_t)(uint8_t)d->kind << 24 | (uint64_t)(uint8_t)d->dtype << 16 |
                           (uint64_t)(uint16_t)d->op;
    return mix64(mix64(prev ^ small) ^ d->count);
}

static uint64_t min_peer_seq(ncclComm_t c)
{
    uint64_t m = UINT64_MAX;
    for (int k = 0; k < c->nranks; k++) {
        uint64_t v = atomic_load_explicit(&c->seg.ranks[k].seq, memory_order_acquire);
        if (k != c->rank && v < m)
            m = v;
    }
    return m;
}

ncclResult_t n4p_round_open(ncclComm_t c, const n4p_op *o, unsigned reuse, int direct)
{
    const uint64_t t = c->epoch;
    const uint64_t need = t + 2 > reuse ? t + 2 - reuse : 0;
    if (need > c->seen_all) {
        ncclResult_t rc = n4p_wait_arrived(c, N4P_ALL, need, "staging buffers to be free");
        if (rc != ncclSuccess)
            return rc;
        c->seen_all = c->nranks > 1 ? min_peer_seq(c) : UINT64_MAX;
    }
    if (o != NULL) {
        n4p_desc d = {
            .epoch = t,
            .count = o->count,
            .kind = o->kind,
            .dtype = o->dtype,
            .op = n4p_is_reduction(o->kind) ? (o->op < ncclNumOps ? o->op : -1) : 0,
            .root = n4p_is_rooted(o->kind) ? o->root : -1,
            .direct = direct,
            .sbuf = (uint64_t)(uintptr_t)o->sendbuff,
            .rbuf = (uint64_t)(uintptr_t)o->recvbuff,
        };
        memcpy(d.tag, o->tag, sizeof d.tag);
        d.chain = n4p_tag_chain(chain(c->desc.chain, &d), d.tag);
        c->desc = d;
        c->seg.ranks[c->rank].desc[t % N4P_DEPTH] = d;
    }
    return ncclSuccess;
}

/* A call as the messages show it: "ncclReduce(count=4, float32, op=sum,
 * root=1)", with op only for reductions and root only where there is one
 * (the op names are the trace's, src/gen/enum_names.h; the dtype names the
 * one table's, src/gen/dtype_table.h). */
static void describe_call(char *buf, size_t size, const n4p_desc *d)
{
    static const char *const op_names[] = {N4P_NAMES_ncclRedOp_t};
    char op[40] = "", root[24] = "";
    if (n4p_is_reduction(d->kind)) {
        if (d->op >= 0 && (size_t)d->op < sizeof op_names / sizeof op_names[0])
            snprintf(op, sizeof op, ", op=%s", op_names[d->op]);
        else if (d->op == -1)
            snprintf(op, sizeof op, ", op=premulsum");
        else
            snprintf(op, sizeof op, ", op=%d", (int)d->op);
    }
    if (n4p_is_rooted(d->kind))
        snprintf(root, sizeof root, ", root=%d", (int)d->root);
    snprintf(buf, size, "%s(count=%llu, %s%s%s)%s%.*s", n4p_kind_name(d->kind),
             (unsigned long long)d->count, n4p_dtype_name(d->dtype), op, root,
             d->tag[0] ? " for " : "", N4P_TAG_LEN, d->tag);
}

static ncclResult_t mismatch(ncclComm_t c, int k, const n4p_desc *p)
{
    const n4p_desc *d = &c->desc;
    char mine[160 + N4P_TAG_LEN], theirs[160 + N4P_TAG_LEN];
    describe_call(mine, sizeof mine, d);
    describe_call(theirs, sizeof theirs, p);
    n4p_set_error(c, "mismatched collective calls: this rank called %s but rank %d called %s%s",
                  mine, k, theirs,
                  p->epoch != d->epoch ? " (collective sequence differs)" : "");
    n4p_comm_failed(c, ncclInvalidUsage);
    n4p_poison(c, ncclInvalidUsage);
    return ncclInvalidUsage;
}

/* This call agrees with rank k's, but an earlier one that nobody compared
 * did not. */
static ncclResult_t earlier_mismatch(ncclComm_t c, int k)
{
    n4p_set_error(c,
                  "mismatched collective calls: this rank and rank %d both called %s now, "
                  "but an earlier collective of the communicator differed between them "
                  "(one that completed without the ranks waiting for each other, such as "
                  "a broadcast, reduce, gather or scatter with a different root or "
                  "different calls on the two ranks)",
                  k, n4p_kind_name(c->desc.kind));
    n4p_comm_failed(c, ncclInvalidUsage);
    n4p_poison(c, ncclInvalidUsage);
    return ncclInvalidUsage;
}

ncclResult_t n4p_round_close(ncclComm_t c, bool check, int from)
{
    const uint64_t t = c->epoch;
    n4p_arrive(c);
    if (from == N4P_NOBODY)
        return ncclSuccess;
    ncclResult_t rc = n4p_wait_arrived(c, from, t + 1,
                                       from == N4P_ALL ? "barrier" : "data from the root");
    if (rc != ncclSuccess)
        return rc;
    if (from == N4P_ALL && c->seen_all < t + 1)
        c->seen_all = t + 1;
    if (!check)
        return ncclSuccess;
    const n4p_desc *d = &c->desc;
    for (int k = from == N4P_ALL ? 0 : from; k < (from == N4P_ALL ? c->nranks : from + 1);
         k++) {
        const n4p_desc *p = &c->seg.ranks[k].desc[t % N4P_DEPTH];
        if (p->epoch != d->epoch || p->kind != d->kind || p->count != d->count ||
            p->dtype != d->dtype || p->op != d->op || p->root != d->root ||
            !n4p_tag_same(p->tag, d->tag))
            return mismatch(c, k, p);
        if (p->chain != d->chain)
            return earlier_mismatch(c, k);
        if ((p->direct == N4P_DIRECT_NO) != (d->direct == N4P_DIRECT_NO)) {
            n4p_set_error(c,
                          "%s: rank %d and rank %d disagree on single-copy transfers "
                          "(NCCL4PY_HOST_SINGLE_COPY must be the same on every rank)",
                          n4p_kind_name(d->kind), c->rank, k);
            n4p_comm_failed(c, ncclInvalidUsage);
            n4p_poison(c, ncclInvalidUsage);
            return ncclInvalidUsage;
        }
    }
    return ncclSuccess;
}
