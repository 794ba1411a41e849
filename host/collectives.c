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
 * Staging protocol.  Collectives move data through per-rank staging slots in
 * the segment, in "rounds": each rank writes its part into its slot, all
 * ranks meet at a barrier (sync.c), then each rank reads what it needs from
 * the slots.  Two sets of slots alternate by barrier parity: data written to
 * a set before barrier e is read only before the reader arrives at barrier
 * e+1, and that set is rewritten only after barrier e+1, so one barrier per
 * round suffices.  Large messages are cut into rounds of one slot, which
 * bounds the segment and gives one copy in and one copy out per rank.
 *
 * Only what a peer needs goes through the segment: a rank copies its own
 * block straight from sendbuff to recvbuff (allgather, alltoall), and reads
 * its own piece of the input from sendbuff when it reduces (reduce-scatter,
 * all-reduce); its slot holds one piece per peer.  Large all-reduces
 * pipeline two steps over rounds of one slot: round t stages chunk t (each
 * rank the shares the others reduce), then, after its barrier, each rank
 * reduces its 1/nranks share of chunk t into a result slot and copies out
 * the result of chunk t-1, complete since everybody passed that barrier: one
 * barrier per chunk.  Small all-reduces (<= 64 KiB) use one round in which
 * each rank reduces all slots itself.  Both reduce each element in rank
 * order with the same kernel (reduce.c), so all ranks and both paths
 * produce bit-identical results.
 *
 * Checking.  At its first barrier every collective publishes (kind, count,
 * type, op, root) and compares it with every peer's, so mismatched calls
 * fail with ncclInvalidUsage on all ranks instead of corrupting data.
 *
 * In place.  Each round copies its input to shared memory before any output
 * of that round is written, so the in-place forms defined by NCCL
 * (allgather: sendbuff == recvbuff + rank*sendcount; reducescatter:
 * sendbuff + rank*recvcount == recvbuff; gather / scatter at the root;
 * sendbuff == recvbuff for the others) all work; where a rank reads its own
 * input from sendbuff, it reads each byte before it writes the same byte of
 * recvbuff.  Zero-count collectives
 * return at once without synchronising, as in NCCL.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SMALL_ALLREDUCE (64u << 10)

static const char *kind_name(int kind)
{
    switch (kind) {
    case N4P_K_ALLREDUCE:
        return "ncclAllReduce";
    case N4P_K_BROADCAST:
        return "ncclBroadcast";
    case N4P_K_REDUCE:
        return "ncclReduce";
    case N4P_K_ALLGATHER:
        return "ncclAllGather";
    case N4P_K_REDUCESCATTER:
        return "ncclReduceScatter";
    case N4P_K_ALLTOALL:
        return "ncclAlltoAll";
    case N4P_K_ALLTOALLV:
        return "ncclAllToAllv";
    case N4P_K_GATHER:
        return "ncclGather";
    case N4P_K_SCATTER:
        return "ncclScatter";
    case N4P_K_ALLREDUCE_BIAS:
        return "ncclAllReduceWithBias";
    case N4P_K_SPLIT:
        return "ncclCommSplit";
    case N4P_K_SHRINK:
        return "ncclCommShrink";
    case N4P_K_SEND:
        return "ncclSend";
    case N4P_K_RECV:
        return "ncclRecv";
    default:
        return "operation";
    }
}

static bool is_reduction(int kind)
{
    return kind == N4P_K_ALLREDUCE || kind == N4P_K_REDUCE ||
           kind == N4P_K_REDUCESCATTER || kind == N4P_K_ALLREDUCE_BIAS;
}

static bool is_rooted(int kind)
{
    return kind == N4P_K_BROADCAST || kind == N4P_K_REDUCE ||
           kind == N4P_K_GATHER || kind == N4P_K_SCATTER;
}

/* Publish what this rank is doing, meet at the barrier, compare. */
ncclResult_t n4p_coll_sync(ncclComm_t comm, const n4p_op *o)
{
    n4p_desc d = {
        .epoch = comm->epoch,
        .count = o->count,
        .kind = o->kind,
        .dtype = o->dtype,
        .op = is_reduction(o->kind) ? (o->op < ncclNumOps ? o->op : -1) : 0,
        .root = is_rooted(o->kind) ? o->root : -1,
    };
    if (o->kind == N4P_K_SPLIT)
        d.dtype = 0, d.count = 0;
    int par = (int)(comm->epoch & 1);
    comm->seg.ranks[comm->rank].desc[par] = d;
    ncclResult_t rc = n4p_barrier(comm);
    if (rc != ncclSuccess)
        return rc;
    for (int k = 0; k < comm->nranks; k++) {
        const n4p_desc *p = &comm->seg.ranks[k].desc[par];
        if (p->epoch == d.epoch && p->kind == d.kind && p->count == d.count &&
            p->dtype == d.dtype && p->op == d.op && p->root == d.root)
            continue;
        n4p_set_error(comm,
                      "mismatched collective calls: this rank called %s(count=%llu, "
                      "%s, op=%d, root=%d) but rank %d called %s(count=%llu, %s, "
                      "op=%d, root=%d)%s",
                      kind_name(d.kind), (unsigned long long)d.count,
                      n4p_dtype_name(d.dtype), d.op, d.root, k, kind_name(p->kind),
                      (unsigned long long)p->count, n4p_dtype_name(p->dtype), p->op,
                      p->root,
                      p->epoch != d.epoch ? " (collective sequence differs)" : "");
        n4p_comm_failed(comm, ncclInvalidUsage);
        n4p_poison(comm, ncclInvalidUsage);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

/* Barrier of the first round checks the call; later rounds only meet. */
static ncclResult_t round_sync(ncclComm_t comm, const n4p_op *o, bool *first)
{
    if (*first) {
        *first = false;
        return n4p_coll_sync(comm, o);
    }
    return n4p_barrier(comm);
}

#define SLOT(set, k) ((char *)n4p_slot(c, (set), (k)))
#define CUR_SET ((int)(c->epoch & 1))

/* Where the piece a rank `src` stages for rank `dst` sits in src's slot
 * when the slot holds one piece per peer and none for src itself. */
static inline size_t peer_pos(int dst, int src)
{
    return (size_t)(dst < src ? dst : dst - 1);
}

/* Pieces per slot when a slot holds one piece per peer. */
static inline size_t npeers(int n)
{
    return n > 1 ? (size_t)n - 1 : 1;
}

/* The share [*lo, *hi) of m elements that rank k reduces. */
static inline void share(size_t m, int k, int n, size_t *lo, size_t *hi)
{
    *lo = m * (size_t)k / (size_t)n;
    *hi = m * (size_t)(k + 1) / (size_t)n;
}

static ncclResult_t all_reduce(ncclComm_t c, const n4p_op *o,
                               const n4p_redspec *rs, bool root_only)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t S = c->seg.slot_bytes;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool want = !root_only || r == o->root;
    const void **srcs = c->srcs;
    const bool nt = want && n4p_streaming(c, o->count * esz);
    bool first = true;
    ncclResult_t rc;

    if (o->count * esz <= SMALL_ALLREDUCE && o->count * esz <= S) {
        /* latency path: one round, every rank reduces everything */
        int set = CUR_SET;
        memcpy(SLOT(set, r), send, o->count * esz);
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        if (want) {
            for (int k = 0; k < n; k++)
                srcs[k] = SLOT(set, k);
            n4p_reduce(rs, recv, srcs, n, o->count);
        }
        return ncclSuccess;
    }
    /* Chunks of one slot, in pipelined rounds: round t stages chunk t
     * (every rank copies in the shares the others reduce; its own share is
     * read from sendbuff), then, after the barrier, reduces its share of
     * chunk t into the result slot of this round's set and copies out the
     * result of chunk t-1, complete since everybody passed the barrier.  One
     * barrier per chunk, plus one to collect the last result. */
    const size_t chunk = S / esz;
    size_t prev_off = 0, prev_m = 0;
    for (size_t off = 0;; off += chunk) {
        const size_t m = off < o->count ? (o->count - off < chunk ? o->count - off : chunk) : 0;
        size_t lo, hi;
        share(m, r, n, &lo, &hi);
        if (m > 0) {
            char *mine = SLOT(CUR_SET, r);
            memcpy(mine, send + off * esz, lo * esz);
            memcpy(mine + hi * esz, send + (off + hi) * esz, (m - hi) * esz);
        }
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        /* staged before the barrier: inputs in the other set, results of
         * the previous round in this one */
        const int in = CUR_SET ^ 1, res = CUR_SET;
        if (want && prev_m > 0)
            n4p_copy(recv + prev_off * esz, SLOT(res ^ 1, n), prev_m * esz, nt);
        if (m == 0)
            break;
        for (int k = 0; k < n; k++)
            srcs[k] = k == r ? send + (off + lo) * esz : SLOT(in, k) + lo * esz;
        n4p_reduce(rs, SLOT(res, n) + lo * esz, srcs, n, hi - lo);
        prev_off = off, prev_m = m;
    }
    return ncclSuccess;
}
/* The root stages each chunk in the whole slot set; the others copy it out
 * after the barrier, while the root already stages the next chunk.  An
 * out-of-place root copies each chunk to its receive buffer while it is
 * still in its cache. */
static ncclResult_t broadcast(ncclComm_t c, const n4p_op *o)
{
    const int n = c->nranks, r = c->rank;
    const size_t bytes = o->count * n4p_dtype_size(o->dtype);
    const size_t span = (size_t)(n + 1) * c->seg.slot_bytes; /* whole set */
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool nt = n4p_streaming(c, bytes);
    bool first = true;
    ncclResult_t rc;
    for (size_t off = 0; off < bytes; off += span) {
        size_t m = bytes - off < span ? bytes - off : span;
        int set = CUR_SET;
        if (r == o->root) {
            memcpy(SLOT(set, 0), send + off, m);
            if (send != recv)
                n4p_copy(recv + off, send + off, m, nt);
        }
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        if (r != o->root)
            n4p_copy(recv + off, SLOT(set, 0), m, nt);
    }
    return ncclSuccess;
}

/* Each rank stages its chunk; its own part goes straight from sendbuff to
 * recvbuff, the others' are copied out of their slots after the barrier. */
static ncclResult_t all_gather(ncclComm_t c, const n4p_op *o, bool root_only)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t chunk = c->seg.slot_bytes / esz;
    const bool want = !root_only || r == o->root;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    char *own = recv + (size_t)r * o->count * esz;
    const bool nt = want && n4p_streaming(c, (size_t)n * o->count * esz);
    bool first = true;
    ncclResult_t rc;
    for (size_t off = 0; off < o->count; off += chunk) {
        size_t m = o->count - off < chunk ? o->count - off : chunk;
        int set = CUR_SET;
        if (n > 1 && (!root_only || r != o->root))
            memcpy(SLOT(set, r), send + off * esz, m * esz);
        if (want && own != send)
            n4p_copy(own + off * esz, send + off * esz, m * esz, nt);
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        if (!want)
            continue;
        for (int k = 0; k < n; k++)
            if (k != r)
                n4p_copy(recv + ((size_t)k * o->count + off) * esz, SLOT(set, k), m * esz,
                         nt);
    }
    return ncclSuccess;
}

/* Each rank stages the pieces the others reduce (one per peer); it reads
 * its own piece from sendbuff. */
static ncclResult_t reduce_scatter(ncclComm_t c, const n4p_op *o,
                                   const n4p_redspec *rs)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t piece = c->seg.slot_bytes / (npeers(n) * esz);
    const size_t cnt = o->count;
    const char *send = o->sendbuff;
    const void **srcs = c->srcs;
    bool first = true;
    ncclResult_t rc;
    for (size_t off = 0; off < cnt; off += piece) {
        size_t m = cnt - off < piece ? cnt - off : piece;
        int set = CUR_SET;
        for (int d = 0; d < n; d++)
            if (d != r)
                memcpy(SLOT(set, r) + peer_pos(d, r) * m * esz,
                       send + ((size_t)d * cnt + off) * esz, m * esz);
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        for (int k = 0; k < n; k++)
            srcs[k] = k == r ? send + ((size_t)r * cnt + off) * esz
                             : SLOT(set, k) + peer_pos(r, k) * m * esz;
        n4p_reduce(rs, (char *)o->recvbuff + off * esz, srcs, n, m);
    }
    return ncclSuccess;
}

/* Each rank stages one piece per peer; its own block goes straight from
 * sendbuff to recvbuff. */
static ncclResult_t all_to_all(ncclComm_t c, const n4p_op *o)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t piece = c->seg.slot_bytes / (npeers(n) * esz);
    const size_t cnt = o->count;
    const char *send = o->sendbuff;
    char *recv = o->recvbuff;
    const bool nt = n4p_streaming(c, (size_t)n * cnt * esz);
    bool first = true;
    ncclResult_t rc;
    for (size_t off = 0; off < cnt; off += piece) {
        size_t m = cnt - off < piece ? cnt - off : piece;
        int set = CUR_SET;
        for (int d = 0; d < n; d++)
            if (d != r)
                memcpy(SLOT(set, r) + peer_pos(d, r) * m * esz,
                       send + ((size_t)d * cnt + off) * esz, m * esz);
        size_t mine = ((size_t)r * cnt + off) * esz;
        if (send != recv)
            n4p_copy(recv + mine, send + mine, m * esz, nt);
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        for (int s = 0; s < n; s++)
            if (s != r)
                n4p_copy(recv + ((size_t)s * cnt + off) * esz,
                         SLOT(set, s) + peer_pos(r, s) * m * esz, m * esz, nt);
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
    bool first = true;
    ncclResult_t rc;

    /* Round 0: everybody publishes its send and receive counts, so that all
     * ranks check every pair and agree on the number of data rounds. */
    int set = CUR_SET;
    memcpy(SLOT(set, r), scount, nn * sizeof(size_t));
    memcpy(SLOT(set, r) + nn * sizeof(size_t), rcount, nn * sizeof(size_t));
    if ((rc = round_sync(c, o, &first)) != ncclSuccess)
        return rc;
    size_t maxc = 0;
    for (int s = 0; s < n; s++) {
        const size_t *ps = (const size_t *)SLOT(set, s);
        for (int d = 0; d < n; d++) {
            const size_t *pd = (const size_t *)SLOT(set, d) + nn;
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
        set = CUR_SET;
        for (int d = 0; d < n; d++) {
            size_t len = scount[d] > off ? scount[d] - off : 0;
            if (len > piece)
                len = piece;
            memcpy(SLOT(set, r) + (size_t)d * piece * esz,
                   (const char *)o->sendbuff + (sdispl[d] + off) * esz, len * esz);
        }
        if ((rc = n4p_barrier(c)) != ncclSuccess)
            return rc;
        for (int s = 0; s < n; s++) {
            size_t len = rcount[s] > off ? rcount[s] - off : 0;
            if (len > piece)
                len = piece;
            memcpy((char *)o->recvbuff + (rdispl[s] + off) * esz,
                   SLOT(set, s) + (size_t)r * piece * esz, len * esz);
        }
    }
    return ncclSuccess;
}

static ncclResult_t scatter(ncclComm_t c, const n4p_op *o)
{
    const int n = c->nranks, r = c->rank;
    const size_t esz = n4p_dtype_size(o->dtype);
    const size_t chunk = c->seg.slot_bytes / esz;
    const char *own = (const char *)o->sendbuff + (size_t)r * o->count * esz;
    const bool inplace = r == o->root && own == (const char *)o->recvbuff;
    bool first = true;
    ncclResult_t rc;
    for (size_t off = 0; off < o->count; off += chunk) {
        size_t m = o->count - off < chunk ? o->count - off : chunk;
        int set = CUR_SET;
        if (r == o->root)
            for (int d = 0; d < n; d++)
                memcpy(SLOT(set, d),
                       (const char *)o->sendbuff + ((size_t)d * o->count + off) * esz,
                       m * esz);
        if ((rc = round_sync(c, o, &first)) != ncclSuccess)
            return rc;
        if (!inplace)
            memcpy((char *)o->recvbuff + off * esz, SLOT(set, r), m * esz);
    }
    return ncclSuccess;
}

ncclResult_t n4p_exec_coll(n4p_op *o)
{
    ncclComm_t c = o->comm;
    n4p_redspec rs;
    ncclResult_t rc;
    c->cur_op = kind_name(o->kind);
    switch (o->kind) {
    case N4P_K_INIT_WAIT:
        c->cur_op = "ncclCommInitRank";
        rc = n4p_wait_joined(c);
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
    default:
        break;
    }
    c->opseq++;
    if ((rc = n4p_check_poison(c)) != ncclSuccess) /* a rank failed earlier */
        return rc;
    if (o->count == 0 && o->kind != N4P_K_ALLTOALLV)
        return ncclSuccess;
    if (is_reduction(o->kind)) {
        rc = n4p_resolve_op(c, o->op, o->dtype, &rs);
        if (rc != ncclSuccess)
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
    if (rc == ncclSuccess)
        c->cur_op = NULL;
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
    const char *name = kind_name(kind);
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    const size_t esz = n4p_dtype_size(dtype);
    if (esz == 0)
        return n4p_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", name,
                        dtype);
    if (is_reduction(kind)) {
        n4p_redspec rs;
        if (op < 0 || (op >= ncclNumOps && op - ncclNumOps >= comm->nops))
            return n4p_fail(comm, ncclInvalidArgument,
                            "%s: invalid reduction op %d", name, op);
        rc = n4p_resolve_op(comm, op, dtype, &rs);
        if (rc != ncclSuccess)
            return rc;
    }
    const int n = comm->nranks, r = comm->rank;
    if (is_rooted(kind) && (root < 0 || root >= n))
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

N4P_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff,
                                      size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op,
                       -1, comm, NULL);
}

N4P_EXPORT ncclResult_t ncclAllReduceWithBias(const void *sendbuff, void *recvbuff,
                                              size_t count, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream, const void *acc)
{
    (void)stream;
    return submit_coll(N4P_K_ALLREDUCE_BIAS, sendbuff, recvbuff, count, datatype,
                       op, -1, comm, acc);
}

N4P_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff,
                                   size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, int root, ncclComm_t comm,
                                   cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_REDUCE, sendbuff, recvbuff, count, datatype, op, root,
                       comm, NULL);
}

N4P_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff,
                                      size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_BROADCAST, sendbuff, recvbuff, count, datatype, 0,
                       root, comm, NULL);
}

N4P_EXPORT ncclResult_t ncclBcast(void *buff, size_t count,
                                  ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_BROADCAST, buff, buff, count, datatype, 0, root, comm,
                       NULL);
}

N4P_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                                      size_t sendcount, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0,
                       -1, comm, NULL);
}

N4P_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                                          size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op,
                                          ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_REDUCESCATTER, sendbuff, recvbuff, recvcount,
                       datatype, op, -1, comm, NULL);
}

N4P_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff,
                                     size_t count, ncclDataType_t datatype,
                                     ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_ALLTOALL, sendbuff, recvbuff, count, datatype, 0, -1,
                       comm, NULL);
}

N4P_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff,
                                   size_t count, ncclDataType_t datatype, int root,
                                   ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_GATHER, sendbuff, recvbuff, count, datatype, 0, root,
                       comm, NULL);
}

N4P_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff,
                                    size_t count, ncclDataType_t datatype, int root,
                                    ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_SCATTER, sendbuff, recvbuff, count, datatype, 0, root,
                       comm, NULL);
}

static ncclResult_t all_to_all_v_submit(const void *sendbuff,
                                       const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuff,
                                       const size_t *recvcounts,
                                       const size_t *rdispls,
                                       ncclDataType_t datatype, ncclComm_t comm)
{
    const char *name = "ncclAllToAllv";
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    const size_t esz = n4p_dtype_size(datatype);
    if (esz == 0)
        return n4p_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", name,
                        (int)datatype);
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
