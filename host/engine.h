/*
 * engine.h - what the engines share: one file per collective family
 * (allreduce.c, reduce_scatter.c, broadcast.c, scatter.c, allgather.c,
 * alltoall.c), each with its staged form and, where it has one, its
 * single-copy form (direct.c holds the rounds those share): building a
 * round (rounds.c), the arithmetic of pieces and shares, and the engines'
 * signatures.
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
 * results, in three rounds (allreduce.c).  The size from which single
 * copy pays depends on the collective and on whether the ranks outnumber
 * the CPUs (policy.c); above it, the all-reduce, all-gather and all-to-all
 * measure which path is faster (policy.c).
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
#ifndef N4P_HOST_ENGINE_H
#define N4P_HOST_ENGINE_H

#include "transport.h"

#define SLOT(set, k) ((char *)n4p_slot(c, (set), (k)))
#define EAGER(k) ((char *)n4p_eager(c, (k), rd.t))

/* One round being built (rounds.c): the collective's description goes with
 * its first round. */
typedef struct {
    ncclComm_t c;
    const n4p_op *o; /* until the first round has been closed */
    uint64_t t;      /* the round */
    int set;         /* the slot set it writes: t & 1 */
} round_t;

/* Begin a round that writes the eager entries (or nothing), or else the
 * next set of staging slots. */
static inline ncclResult_t begin(round_t *rd, bool eager)
{
    rd->t = rd->c->epoch;
    rd->set = (int)(rd->t & 1);
    return n4p_round_open(rd->c, rd->o, eager ? N4P_REUSE_EAGER : N4P_REUSE_SETS,
                          N4P_DIRECT_NO);
}

/* Arrive; wait for `from` (a rank, N4P_ALL or N4P_NOBODY). */
static inline ncclResult_t end(round_t *rd, int from)
{
    bool check = rd->o != NULL;
    rd->o = NULL;
    return n4p_round_close(rd->c, check, from);
}

/* A round that writes nothing: arrive, wait for `from` (a rank, N4P_ALL or
 * N4P_NOBODY). */
static inline ncclResult_t wait_round(round_t *rd, int from)
{
    ncclResult_t rc = begin(rd, true);
    return rc != ncclSuccess ? rc : end(rd, from);
}

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

/* The length of the piece that starts at `off` of `total` in pieces of
 * `piece`: min(piece, total - off), and 0 from the end on. */
static inline size_t part(size_t total, size_t off, size_t piece)
{
    return off < total ? (total - off < piece ? total - off : piece) : 0;
}

/* The share [*lo, *hi) of m elements that rank k reduces. */
static inline void share(size_t m, int k, int n, size_t *lo, size_t *hi)
{
    *lo = m * (size_t)k / (size_t)n;
    *hi = m * (size_t)(k + 1) / (size_t)n;
}

/* A pairwise exchange (reduce-scatter, all-to-all): rank r's block d of
 * sendbuff (cnt elements) goes to rank d, in rounds of `piece` elements per
 * peer; eager when every block fits at once. */
typedef struct {
    size_t esz, cnt, piece;
    bool eager;
} pairwise_t;

static inline pairwise_t pairwise(ncclComm_t c, const n4p_op *o)
{
    pairwise_t p = {.esz = n4p_dtype_size(o->dtype), .cnt = o->count};
    p.eager = npeers(c->nranks) * p.cnt * p.esz <= N4P_EAGER_BYTES;
    p.piece = p.eager ? p.cnt : c->seg.slot_bytes / (npeers(c->nranks) * p.esz);
    return p;
}

/* Begin a round of m elements at `off` and stage this rank's piece of
 * `send` for every peer. */
static inline ncclResult_t stage_pairwise(round_t *rd, const pairwise_t *p, const char *send,
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
static inline const char *staged_pairwise(const round_t *rd, const pairwise_t *p, int k,
                                          size_t m)
{
    ncclComm_t c = rd->c;
    const char *base = p->eager ? n4p_eager(c, k, rd->t) : n4p_slot(c, rd->set, k);
    return base + peer_pos(c->rank, k) * m * p->esz;
}

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------ engines -- */

/* A staged engine: the whole call through the segment. */
typedef ncclResult_t (*n4p_staged_fn)(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
/* A single-copy engine, after round one (direct.c), in which every rank
 * published its buffers (their sendbuffs are in c->srcs) and agreed to
 * take part.  It sets *go to false, having done nothing, when the call is
 * to be staged after all. */
typedef ncclResult_t (*n4p_direct_fn)(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                      round_t *rd, bool *go);

/* allreduce.c */
ncclResult_t n4p_allreduce_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_reduce_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_allreduce_bias_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_allreduce_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go);
/* reduce_scatter.c */
ncclResult_t n4p_reduce_scatter_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
/* broadcast.c */
ncclResult_t n4p_broadcast_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_broadcast_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go);
/* scatter.c */
ncclResult_t n4p_scatter_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
/* allgather.c */
ncclResult_t n4p_allgather_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_gather_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_allgather_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                  round_t *rd, bool *go);
ncclResult_t n4p_gather_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                               round_t *rd, bool *go);
/* alltoall.c */
ncclResult_t n4p_alltoall_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_alltoallv_staged(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs);
ncclResult_t n4p_alltoall_direct(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                                 round_t *rd, bool *go);

/* --------------------------------------------------- kinds (kinds.c) -- */

/* The elements of a buffer of a call, in units of its count: none, count,
 * count * nranks, and the same on the root only (none elsewhere). */
enum { N4P_SPAN_NONE, N4P_SPAN_1, N4P_SPAN_N, N4P_SPAN_ROOT_1, N4P_SPAN_ROOT_N };
/* Which overlap of sendbuff and recvbuff single copy takes (policy.c): any
 * (a broadcast's root writes only into the receivers), none, the same
 * buffer (in place), or sendbuff being this rank's block of recvbuff. */
enum { N4P_OVERLAP_ANY, N4P_OVERLAP_APART, N4P_OVERLAP_SAME, N4P_OVERLAP_OWN_BLOCK };

/* The executor of a kind that moves no data of its own (join, split,
 * shrink, grow). */
typedef ncclResult_t (*n4p_exec_fn)(n4p_op *o);

/* One kind's descriptor (its row in kinds.c).  Ordered by alignment. */
typedef struct {
    const char *name;     /* the API function, for messages */
    n4p_exec_fn exec;     /* or NULL: a collective (staged, direct) */
    n4p_staged_fn staged; /* or NULL: no collective (send, receive: p2p.c) */
    n4p_direct_fn direct; /* its single-copy form, or NULL */
    size_t auto_min;      /* NCCL4PY_HOST_SINGLE_COPY=auto: smallest block tried single copy */
    size_t crowded_min;   /* the same with more ranks than online CPUs */
    int traits;           /* N4P_KT_* */
    int8_t send, recv;    /* N4P_SPAN_* of sendbuff and recvbuff */
    int8_t bias;          /* N4P_SPAN_* of the bias (acc) */
    int8_t overlap;       /* N4P_OVERLAP_* */
    int8_t tune_row;      /* its row of ncclComm.tune when auto measures both paths, or -1 */
    bool tune_crowded;    /* measured also with more ranks than CPUs */
    bool vote_slowest;    /* the vote takes the slowest rank's time, not the sum */
} n4p_kind;

const n4p_kind *n4p_kind_of(int kind);
/* The elements of a buffer of span `span` (N4P_SPAN_*) on this rank. */
size_t n4p_span_elems(int span, size_t count, int nranks, bool root);
/* Whether a buffer of the kind holds count * nranks elements. */
bool n4p_kind_scales(const n4p_kind *k);

/* comm_make.c: the kinds that make communicators */
void n4p_grow_id(ncclComm_t comm, ncclUniqueId *out); /* the id of comm's next grow */
ncclResult_t n4p_exec_join(n4p_op *o);
ncclResult_t n4p_exec_split(n4p_op *o);
ncclResult_t n4p_exec_shrink(n4p_op *o);
ncclResult_t n4p_exec_grow(n4p_op *o);

/* p2p.c: a batch of sends and receives of one communicator */
ncclResult_t n4p_exec_p2p(ncclComm_t comm, n4p_op *ops, int nops);

/* -------------------------------------------- the path (policy.c) -- */

/* Whether the ranks outnumber the online CPUs. */
bool n4p_crowded(ncclComm_t c);
/* Whether call `o` tries single copy: N4P_DIRECT_NO, _OK or _VETO (this
 * rank cannot take part); a measured call also takes its turn or the
 * vote's choice here. */
ncclResult_t n4p_path_choice(ncclComm_t c, const n4p_op *o, const n4p_kind *k, int *choice);
/* after a call that succeeded: its time, if it is measured */
void n4p_tune_record(ncclComm_t c);

/* direct.c: the rounds a single-copy engine runs in.  n4p_direct_run runs
 * round one, then `engine` (*done: it ran the call); n4p_direct_bounced
 * tells whether a read of the call's blocks (count elements) of every
 * peer's sendbuff (at_rank: at the reader's block, for an all-to-all) into
 * the recvbuff of `reader` (a rank, or N4P_ALL), as published in round
 * one (`round`), would land at a slow distance (copy.c), and says so once
 * per communicator. */
ncclResult_t n4p_direct_run(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs, int choice,
                            n4p_direct_fn engine, bool *done);
bool n4p_direct_bounced(ncclComm_t c, const n4p_op *o, uint64_t round, int reader,
                        bool at_rank);

#pragma GCC visibility pop

static inline uint64_t n4p_addr(const void *p, size_t off)
{
    return (uint64_t)(uintptr_t)p + off;
}

#endif /* N4P_HOST_ENGINE_H */
