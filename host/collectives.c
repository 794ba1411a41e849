/*
 * collectives.c - the collective operations of the host backend.
 *
 * Design of the backend
 * ---------------------
 * libnccl4py_host.so implements the NCCL C ABI on host memory.  A rank is a
 * process (or, with ncclCommInitAll, one of several communicators of a
 * process); all ranks of a communicator map one POSIX shared-memory segment
 * (shm.c).  Nothing runs in the background: no threads, no streams.
 *
 * Completion and ordering.  Every call completes before it returns: when
 * ncclAllReduce returns, recvbuff holds the result; when ncclSend returns
 * outside a group, the data has been copied out of sendbuff (it may still
 * sit in the shared ring until the peer receives it).  The stream argument
 * is accepted and ignored, so "stream order" is simply program order on the
 * calling thread.  Calls between ncclGroupStart and the matching outermost
 * ncclGroupEnd are queued and run inside ncclGroupEnd (group.c): per
 * communicator, the collectives in the order they were issued, then all its
 * sends and receives together, progressed until all are done.  Collectives of
 * different communicators in one group run concurrently, one thread per
 * communicator, so several ranks driven by one thread work.  As with NCCL,
 * every rank must issue the collectives of a communicator in the same order.
 *
 * Staging protocol.  Collectives move data through buffers of the segment
 * in rounds (rounds.c): in each round a rank writes what its peers need,
 * arrives, waits for the ranks whose data it needs, and reads.  Small
 * collectives (at most N4P_EAGER_BYTES staged per rank) take one round
 * through per-rank eager entries; larger ones go through per-rank staging
 * slots in rounds of one slot, which bounds the segment and gives one copy
 * in and one copy out per rank.  Rooted collectives wait only for the
 * root's data (receivers) or for nobody (the root of a broadcast or
 * scatter, the senders of a reduce or gather), so those ranks run ahead.
 *
 * Only what a peer needs goes through the segment: a rank copies its own
 * block straight from sendbuff to recvbuff (allgather, alltoall), and reads
 * its own piece of the input from sendbuff when it reduces (reduce-scatter,
 * all-reduce); its slot holds one piece per peer.  Large all-reduces
 * pipeline two steps over rounds of one slot: round t stages chunk t (each
 * rank the shares the others reduce), then, after everybody arrived, each
 * rank reduces its 1/nranks share of chunk t into a result slot and copies
 * out the result of chunk t-1, complete since everybody arrived at round t.
 * Small all-reduces (<= 64 KiB) use one round in which each rank reduces
 * all inputs itself.  Both reduce each element in rank order with the same
 * kernel (reduce.c), so all ranks and both paths produce bit-identical
 * results.  Outputs larger than the cache are written with streaming
 * stores (copy.c).
 *
 * Single copy.  Large all-gathers, gathers, all-to-alls and broadcasts
 * skip the segment where the kernel allows it (cma.c): each rank reads the
 * peers' sendbuff straight into its recvbuff with process_vm_readv, in two
 * rounds (publish the buffers; hold their owners until the readers are
 * done).  The root of a broadcast, which would otherwise idle while the
 * others read, writes a 1/nranks share of the message into each receiver
 * (process_vm_writev).  A large all-reduce reads the peers' inputs and
 * results, in three rounds (direct.c).  The size from which single
 * copy pays depends on the collective and on whether the ranks outnumber
 * the CPUs (cma.c); above it, the all-reduce, all-gather and all-to-all
 * measure which path is faster (tune.c).
 *
 * Checking.  The first round of every collective publishes (kind, count,
 * type, op, root) and compares it with those of the ranks it waits for, so
 * mismatched calls fail with ncclInvalidUsage instead of corrupting data.
 *
 * In place.  Each round copies its input to shared memory before any output
 * of that round is written, so the in-place forms defined by NCCL
 * (allgather: sendbuff == recvbuff + rank*sendcount; reducescatter:
 * sendbuff + rank*recvcount == recvbuff; gather / scatter at the root;
 * sendbuff == recvbuff for the others) all work; where a rank reads its own
 * input from sendbuff, it reads each byte before it writes the same byte of
 * recvbuff.  Zero-count collectives return at once without synchronising,
 * as in NCCL.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdlib.h>
#include <string.h>

#include "coll_rounds.h"

#define SMALL_ALLREDUCE (64u << 10)

#define EAGER(k) ((char *)n4p_eager(c, (k), rd.t))

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

/* The root stages the data, the others copy it out.  The root waits for
 * nobody: it goes on (to the next chunk, or the next call) while the others
 * copy.  Small messages go through the root's eager entry, large ones in
 * chunks of the whole slot set.  An out-of-place root copies each chunk to
 * its receive buffer while it is still in its cache. */
static ncclResult_t broadcast(ncclComm_t c, const n4p_op *o)
{
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

/* A pairwise exchange (reduce-scatter, all-to-all): rank r's block d of
 * sendbuff (cnt elements) goes to rank d, in rounds of `piece` elements per
 * peer; eager when every block fits at once. */
typedef struct {
    size_t esz, cnt, piece;
    bool eager;
} pairwise_t;

static pairwise_t pairwise(ncclComm_t c, const n4p_op *o)
{
    pairwise_t p = {.esz = n4p_dtype_size(o->dtype), .cnt = o->count};
    p.eager = npeers(c->nranks) * p.cnt * p.esz <= N4P_EAGER_BYTES;
    p.piece = p.eager ? p.cnt : c->seg.slot_bytes / (npeers(c->nranks) * p.esz);
    return p;
}

/* Begin a round of m elements at `off` and stage this rank's piece of
 * `send` for every peer. */
static ncclResult_t stage_pairwise(round_t *rd, const pairwise_t *p, const char *send,
                                   size_t off, size_t m)
{
    ncclComm_t c = rd->c;
    const int n = c->nranks, r = c->rank;
    ncclResult_t rc = begin(rd, p->eager);
    if (rc != ncclSuccess)
        return rc;
    char *mine = p->eager ? n4p_eager(c, r, rd->t) : n4p_slot(c, rd->set, r);
    for (int d = 0; d < n; d++)
        if (d != r)
            n4p_copy(mine + peer_pos(d, r) * m * p->esz,
                     send + ((size_t)d * p->cnt + off) * p->esz, m * p->esz, false);
    return ncclSuccess;
}

/* The piece of m elements rank k staged for this rank in the round. */
static const char *staged_pairwise(const round_t *rd, const pairwise_t *p, int k, size_t m)
{
    ncclComm_t c = rd->c;
    const char *base = p->eager ? n4p_eager(c, k, rd->t) : n4p_slot(c, rd->set, k);
    return base + peer_pos(c->rank, k) * m * p->esz;
}

/* Each rank stages the pieces the others reduce (one per peer); it reads
 * its own piece from sendbuff. */
static ncclResult_t reduce_scatter(ncclComm_t c, const n4p_op *o,
                                   const n4p_redspec *rs)
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

/* Each rank stages one piece per peer; its own block goes straight from
 * sendbuff to recvbuff. */
static ncclResult_t all_to_all(ncclComm_t c, const n4p_op *o)
{
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

static ncclResult_t all_to_all_v(ncclComm_t c, const n4p_op *o)
{
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

/* The root stages one piece per peer and copies its own; it waits for
 * nobody.  The others copy their piece out. */
static ncclResult_t scatter(ncclComm_t c, const n4p_op *o)
{
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

ncclResult_t n4p_exec_coll(n4p_op *o)
{
    ncclComm_t c = o->comm;
    n4p_redspec rs;
    ncclResult_t rc;
    c->cur_op = n4p_kind_name(o->kind);
    switch (o->kind) {
    case N4P_K_INIT_WAIT:
        c->cur_op = c->init_op;
        rc = n4p_comm_join(c);
        if (rc != ncclSuccess)
            n4p_comm_failed(c, rc);
        c->cur_op = NULL;
        return rc;
    case N4P_K_SPLIT:
        c->opseq++;
        return n4p_exec_split(o);
    case N4P_K_SHRINK:
        c->opseq++;
        return n4p_exec_shrink(o);
    case N4P_K_GROW:
        c->opseq++;
        return n4p_exec_grow(o);
    default:
        break;
    }
    c->opseq++;
    if ((rc = n4p_check_poison(c)) != ncclSuccess) /* a rank failed earlier */
        return rc;
    if (o->count == 0 && o->kind != N4P_K_ALLTOALLV)
        return ncclSuccess;
    if (n4p_is_reduction(o->kind)) {
        rc = n4p_resolve_op(c, o->op, o->dtype, &rs);
        if (rc != ncclSuccess)
            return rc;
    }
    bool done = false;
    c->tune_at = NULL; /* n4p_tune_pick sets it when this call is measured */
    if ((rc = n4p_single_copy(c, o, &rs, &done)) != ncclSuccess || done) {
        if (rc == ncclSuccess) {
            n4p_tune_record(c);
            c->cur_op = NULL;
        }
        return rc;
    }
    switch (o->kind) {
    case N4P_K_ALLREDUCE:
        rc = all_reduce(c, o, &rs, false);
        break;
    case N4P_K_ALLREDUCE_BIAS:
        rc = all_reduce(c, o, &rs, false);
        if (rc == ncclSuccess)
            n4p_add_bias(o->dtype, o->recvbuff, o->acc, o->count);
        break;
    case N4P_K_REDUCE:
        rc = all_reduce(c, o, &rs, true);
        break;
    case N4P_K_BROADCAST:
        rc = broadcast(c, o);
        break;
    case N4P_K_ALLGATHER:
        rc = all_gather(c, o, false);
        break;
    case N4P_K_GATHER:
        rc = all_gather(c, o, true);
        break;
    case N4P_K_REDUCESCATTER:
        rc = reduce_scatter(c, o, &rs);
        break;
    case N4P_K_ALLTOALL:
        rc = all_to_all(c, o);
        break;
    case N4P_K_ALLTOALLV:
        rc = all_to_all_v(c, o);
        break;
    case N4P_K_SCATTER:
        rc = scatter(c, o);
        break;
    default:
        rc = n4p_fail(c, ncclInternalError, "unknown operation kind %d", o->kind);
        break;
    }
    if (rc == ncclSuccess) {
        n4p_tune_record(c);
        c->cur_op = NULL;
    }
    return rc;
}

/* ------------------------------------------------------ entry points -- */

static ncclResult_t check_and_submit(int kind, const void *sendbuff,
                                     void *recvbuff, size_t count, int dtype,
                                     int op, int root, ncclComm_t comm,
                                     const void *acc);

static ncclResult_t submit_coll(int kind, const void *sendbuff, void *recvbuff,
                                size_t count, int dtype, int op, int root,
                                ncclComm_t comm, const void *acc)
{
    return n4p_group_note(check_and_submit(kind, sendbuff, recvbuff, count, dtype,
                                           op, root, comm, acc));
}

static ncclResult_t check_and_submit(int kind, const void *sendbuff, void *recvbuff,
                                size_t count, int dtype, int op, int root,
                                ncclComm_t comm, const void *acc)
{
    const char *name = n4p_kind_name(kind);
    size_t esz;
    ncclResult_t rc = n4p_check_call(comm, name, dtype, &esz);
    if (rc != ncclSuccess)
        return rc;
    if (n4p_is_reduction(kind)) {
        n4p_redspec rs;
        if (op < 0 || (op >= ncclNumOps && op - ncclNumOps >= comm->nops))
            return n4p_fail(comm, ncclInvalidArgument,
                            "%s: invalid reduction op %d", name, op);
        rc = n4p_resolve_op(comm, op, dtype, &rs);
        if (rc != ncclSuccess)
            return rc;
    }
    const int n = comm->nranks, r = comm->rank;
    if (n4p_is_rooted(kind) && (root < 0 || root >= n))
        return n4p_fail(comm, ncclInvalidArgument,
                        "%s: root %d is out of range for %d ranks", name, root, n);
    if (count > SIZE_MAX / esz / (size_t)n)
        return n4p_fail(comm, ncclInvalidArgument, "%s: count %zu is too large",
                        name, count);
    size_t ns = count, nr = count;
    switch (kind) {
    case N4P_K_BROADCAST:
        ns = r == root ? count : 0;
        break;
    case N4P_K_REDUCE:
        nr = r == root ? count : 0;
        break;
    case N4P_K_ALLGATHER:
        nr = count * (size_t)n;
        break;
    case N4P_K_REDUCESCATTER:
        ns = count * (size_t)n;
        break;
    case N4P_K_ALLTOALL:
        ns = nr = count * (size_t)n;
        break;
    case N4P_K_GATHER:
        nr = r == root ? count * (size_t)n : 0;
        break;
    case N4P_K_SCATTER:
        ns = r == root ? count * (size_t)n : 0;
        break;
    default:
        break;
    }
    if (ns > 0 && sendbuff == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: sendbuff is NULL", name);
    if (nr > 0 && recvbuff == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: recvbuff is NULL", name);
    if (kind == N4P_K_ALLREDUCE_BIAS && count > 0 && acc == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: acc is NULL", name);
    return n4p_submit_data(kind, comm, sendbuff, recvbuff, count, dtype, op, root, acc);
}

ncclResult_t n4p_submit_data(int kind, ncclComm_t comm, const void *sendbuff, void *recvbuff,
                             size_t count, int dtype, int op, int root, const void *acc)
{
    n4p_op o = {.kind = kind,
                .comm = comm,
                .sendbuff = sendbuff,
                .recvbuff = recvbuff,
                .count = count,
                .dtype = dtype,
                .op = op,
                .root = root,
                .acc = acc};
    return n4p_submit(&o);
}

/* A collective with a config form: its parameters are the API table's
 * (api_decls.h); it submits `cnt` elements with `op_` and `root_` (0 and -1
 * where it has none). */
#define HOST_COLL(name, kind, cnt, op_, root_)                                       \
    N4P_EXPORT ncclResult_t name(N4P_PARAMS_##name)                                  \
    {                                                                                \
        (void)stream;                                                                \
        return submit_coll(kind, sendbuff, recvbuff, cnt, datatype, op_, root_, comm, \
                           NULL);                                                    \
    }

HOST_COLL(ncclAllReduce, N4P_K_ALLREDUCE, count, op, -1)
HOST_COLL(ncclReduce, N4P_K_REDUCE, count, op, root)
HOST_COLL(ncclBroadcast, N4P_K_BROADCAST, count, 0, root)
HOST_COLL(ncclAllGather, N4P_K_ALLGATHER, sendcount, 0, -1)
HOST_COLL(ncclReduceScatter, N4P_K_REDUCESCATTER, recvcount, op, -1)
HOST_COLL(ncclAlltoAll, N4P_K_ALLTOALL, count, 0, -1)
HOST_COLL(ncclGather, N4P_K_GATHER, count, 0, root)
HOST_COLL(ncclScatter, N4P_K_SCATTER, count, 0, root)

N4P_EXPORT ncclResult_t ncclAllReduceWithBias(const void *sendbuff, void *recvbuff,
                                              size_t count, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream, const void *acc)
{
    (void)stream;
    return submit_coll(N4P_K_ALLREDUCE_BIAS, sendbuff, recvbuff, count, datatype,
                       op, -1, comm, acc);
}

N4P_EXPORT ncclResult_t ncclBcast(void *buff, size_t count,
                                  ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_BROADCAST, buff, buff, count, datatype, 0, root, comm,
                       NULL);
}

static ncclResult_t all_to_all_v_submit(const void *sendbuff,
                                       const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuff,
                                       const size_t *recvcounts,
                                       const size_t *rdispls,
                                       ncclDataType_t datatype, ncclComm_t comm)
{
    const char *name = "ncclAllToAllv";
    size_t esz;
    ncclResult_t rc = n4p_check_call(comm, name, (int)datatype, &esz);
    if (rc != ncclSuccess)
        return rc;
    if (sendcounts == NULL || sdispls == NULL || recvcounts == NULL ||
        rdispls == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "%s: a count or displacement array is NULL", name);
    const size_t n = (size_t)comm->nranks;
    size_t stot = 0, rtot = 0;
    for (size_t i = 0; i < n; i++) {
        if (sendcounts[i] > SIZE_MAX / esz / 4 || recvcounts[i] > SIZE_MAX / esz / 4 ||
            sdispls[i] > SIZE_MAX / esz / 4 || rdispls[i] > SIZE_MAX / esz / 4)
            return n4p_fail(comm, ncclInvalidArgument, "%s: count too large", name);
        stot += sendcounts[i];
        rtot += recvcounts[i];
    }
    if ((stot > 0 && sendbuff == NULL) || (rtot > 0 && recvbuff == NULL))
        return n4p_fail(comm, ncclInvalidArgument, "%s: NULL buffer", name);
    size_t *v = malloc(4 * n * sizeof(size_t));
    if (v == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    memcpy(v, sendcounts, n * sizeof(size_t));
    memcpy(v + n, sdispls, n * sizeof(size_t));
    memcpy(v + 2 * n, recvcounts, n * sizeof(size_t));
    memcpy(v + 3 * n, rdispls, n * sizeof(size_t));
    n4p_op o = {.kind = N4P_K_ALLTOALLV,
                .comm = comm,
                .sendbuff = sendbuff,
                .recvbuff = recvbuff,
                .dtype = datatype,
                .root = -1,
                .v = v};
    return n4p_submit(&o); /* takes ownership of v */
}

N4P_EXPORT ncclResult_t ncclAllToAllv(const void *sendbuff, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuff,
                                      const size_t *recvcounts,
                                      const size_t *rdispls,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)stream;
    return n4p_group_note(all_to_all_v_submit(sendbuff, sendcounts, sdispls,
                                              recvbuff, recvcounts, rdispls,
                                              datatype, comm));
}

N4P_EXPORT ncclResult_t ncclAlltoAllv(const void *sendbuff, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuff,
                                      const size_t *recvcounts,
                                      const size_t *rdispls,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream)
{
    return ncclAllToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts,
                         rdispls, datatype, comm, stream);
}
