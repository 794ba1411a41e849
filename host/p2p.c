/*
 * p2p.c - the engine of ncclSend / ncclRecv (their entry points: p2p_api.c).
 *
 * Every ordered pair of ranks (src, dst) owns a byte ring in the segment
 * (single producer, single consumer; `tail` written by the sender, `head` by
 * the receiver).  A message is a 16-byte header carrying its size, followed
 * by the payload: one copy into the ring by the sender, one copy out by the
 * receiver.  Messages between a pair are FIFO, which gives NCCL's matching
 * rule: the k-th send from A to B matches the k-th receive on B from A.  A
 * size mismatch is reported as ncclInvalidUsage.
 *
 * All sends and receives of one communicator in a group are progressed
 * together: each pass moves as many bytes as the rings allow for every
 * operation that is at the head of its (peer, direction) queue, and the
 * engine waits only when no operation can move.  So any pattern NCCL accepts
 * in a group (rings, all-to-all, self-sends, messages larger than a ring)
 * completes without deadlock.  Outside a group a send returns as soon as its
 * data is in the ring, so small unmatched-yet sends do not block; a send
 * larger than the ring waits for the receiver, as with NCCL.
 *
 * A send carries what its buffer held when the batch started, also when a
 * receive of the batch writes into that buffer (nccl-tests' in-place
 * sendrecv): before a receive writes bytes that a send has yet to read,
 * they are copied aside and the send reads them from the copy
 * (p2p_overlap.c).  Without such overlaps nothing is copied.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "p2p_overlap.h"

#define MSG_MAGIC 0x6e34706du

typedef struct {
    uint64_t bytes;
    uint32_t magic;
    uint32_t dtype;
} msg_hdr;

typedef struct {
    ncclComm_t comm;
    n4p_op *ops;
    int nops;
    int remaining;
    double last_check;
    ncclResult_t err;
    n4p_shadow sh; /* sources that receives of the group overwrite */
} engine;

static inline n4p_ring_ctl *ring_ctl(ncclComm_t c, int src, int dst)
{
    return &c->seg.rings[(size_t)src * (size_t)c->nranks + (size_t)dst];
}

static inline char *ring_data(ncclComm_t c, int src, int dst)
{
    return c->seg.data + ((size_t)src * (size_t)c->nranks + (size_t)dst) *
                             c->seg.ring_bytes;
}

static void ring_write(char *ring, size_t cap, uint64_t pos, const void *src,
                       size_t len)
{
    size_t off = (size_t)(pos % cap);
    size_t first = cap - off < len ? cap - off : len;
    n4p_copy(ring + off, src, first, false);
    if (len > first)
        n4p_copy(ring, (const char *)src + first, len - first, false);
}

static void ring_read(const char *ring, size_t cap, uint64_t pos, void *dst,
                      size_t len)
{
    size_t off = (size_t)(pos % cap);
    size_t first = cap - off < len ? cap - off : len;
    n4p_copy(dst, ring + off, first, false);
    if (len > first)
        n4p_copy((char *)dst + first, ring, len - first, false);
}

static size_t op_bytes(const n4p_op *o)
{
    return o->count * n4p_dtype_size(o->dtype);
}

/* Load the head and tail of the ring to (sender) or from `peer`: the end
 * this rank moves relaxed, the other with acquire.  False, with e->err set,
 * when they cannot be right. */
static bool ring_load(engine *e, const n4p_ring_ctl *rc, bool sender, int peer,
                      uint64_t *head, uint64_t *tail)
{
    if (sender) {
        *tail = atomic_load_explicit(&rc->tail, memory_order_relaxed);
        *head = atomic_load_explicit(&rc->head, memory_order_acquire);
    } else {
        *head = atomic_load_explicit(&rc->head, memory_order_relaxed);
        *tail = atomic_load_explicit(&rc->tail, memory_order_acquire);
    }
    if (*tail - *head <= e->comm->seg.ring_bytes)
        return true;
    e->err = n4p_fail(e->comm, ncclInternalError,
                      "the ring %s rank %d is corrupt (head %llu, tail %llu)",
                      sender ? "to" : "from", peer, (unsigned long long)*head,
                      (unsigned long long)*tail);
    return false;
}

/* A send's bytes [src, src + len) into the ring at `pos`: from the caller's
 * buffer, or where a receive of the group has overwritten it, from the
 * copy kept (p2p_overlap.c). */
static void send_bytes(const n4p_shadow *sh, char *ring, size_t cap, uint64_t pos,
                       const char *src, size_t len)
{
    if (sh->nregions == 0) {
        ring_write(ring, cap, pos, src, len);
        return;
    }
    while (len > 0) {
        size_t k;
        const char *from = n4p_shadow_source(sh, src, len, &k);
        ring_write(ring, cap, pos, from, k);
        pos += k;
        src += k;
        len -= k;
    }
}

/* Move what fits in `room` bytes of the message body between the ring
 * (`data`, at *pos, which advances) and the operation's buffer: written
 * for a send, read for a receive.  True if anything moved. */
static bool move_body(engine *e, n4p_op *o, char *data, size_t cap, uint64_t *pos,
                      size_t room, bool send)
{
    size_t left = op_bytes(o) - (size_t)o->done_bytes;
    size_t k = left < room ? left : room;
    if (k == 0)
        return false;
    if (send) {
        send_bytes(&e->sh, data, cap, *pos, (const char *)o->sendbuff + o->done_bytes, k);
    } else {
        char *dst = (char *)o->recvbuff + o->done_bytes;
        if (e->sh.nregions > 0)
            n4p_shadow_before_write(&e->sh, dst, k);
        ring_read(data, cap, *pos, dst, k);
    }
    *pos += k;
    o->done_bytes += k;
    return true;
}

/* Move what fits for one send; true if anything moved. */
static bool send_step(engine *e, n4p_op *o)
{
    ncclComm_t c = e->comm;
    n4p_ring_ctl *rc = ring_ctl(c, c->rank, o->root);
    char *data = ring_data(c, c->rank, o->root);
    const size_t cap = c->seg.ring_bytes;
    uint64_t head, tail;
    if (!ring_load(e, rc, true, o->root, &head, &tail))
        return true;
    size_t space = cap - (size_t)(tail - head);
    bool moved = false;
    if (!o->hdr_done) {
        if (space < sizeof(msg_hdr))
            return false;
        msg_hdr h = {op_bytes(o), MSG_MAGIC, (uint32_t)o->dtype};
        ring_write(data, cap, tail, &h, sizeof h);
        tail += sizeof h;
        space -= sizeof h;
        o->hdr_done = true;
        moved = true;
    }
    if (move_body(e, o, data, cap, &tail, space, true))
        moved = true;
    if (moved)
        atomic_store_explicit(&rc->tail, tail, memory_order_release);
    o->complete = o->hdr_done && o->done_bytes == op_bytes(o);
    return moved;
}

static bool recv_step(engine *e, n4p_op *o)
{
    ncclComm_t c = e->comm;
    n4p_ring_ctl *rc = ring_ctl(c, o->root, c->rank);
    char *data = ring_data(c, o->root, c->rank);
    const size_t cap = c->seg.ring_bytes;
    uint64_t head, tail;
    if (!ring_load(e, rc, false, o->root, &head, &tail))
        return true;
    size_t avail = (size_t)(tail - head);
    bool moved = false;
    if (!o->hdr_done) {
        if (avail < sizeof(msg_hdr))
            return false;
        msg_hdr h;
        ring_read(data, cap, head, &h, sizeof h);
        if (h.magic != MSG_MAGIC || h.bytes != op_bytes(o)) {
            e->err = n4p_fail(c, ncclInvalidUsage,
                              "ncclRecv from rank %d posted %zu bytes but the "
                              "matching ncclSend carries %llu bytes",
                              o->root, op_bytes(o), (unsigned long long)h.bytes);
            return true;
        }
        head += sizeof h;
        avail -= sizeof h;
        o->hdr_done = true;
        moved = true;
    }
    if (move_body(e, o, data, cap, &head, avail, false))
        moved = true;
    if (moved)
        atomic_store_explicit(&rc->head, head, memory_order_release);
    o->complete = o->hdr_done && o->done_bytes == op_bytes(o);
    return moved;
}

/* One pass over the operations at the head of their queues. */
static bool pass(engine *e)
{
    bool moved = false;
    for (int i = 0; i < e->nops && e->err == ncclSuccess; i++) {
        n4p_op *o = &e->ops[i];
        if (o->complete || (o->prev >= 0 && !e->ops[o->prev].complete))
            continue;
        bool m = o->kind == N4P_K_SEND ? send_step(e, o) : recv_step(e, o);
        if (o->complete)
            e->remaining--;
        moved |= m;
    }
    if (moved)
        n4p_notify(e->comm);
    return moved;
}

/* Check the peers of unfinished operations about every 100 ms.  A peer may
 * have finished its part and left (or died) after writing; one more pass
 * picks that data up before a failure is declared. */
static bool peers_failed(engine *e)
{
    double now = n4p_now();
    if (now - e->last_check < 0.1)
        return false;
    e->last_check = now;
    for (int i = 0; i < e->nops; i++) {
        n4p_op *o = &e->ops[i];
        if (o->complete)
            continue;
        ncclResult_t rc = n4p_check_peer(e->comm, o->root,
                                         o->kind == N4P_K_SEND ? "send" : "recv");
        if (rc != ncclSuccess) {
            if (pass(e) || e->err != ncclSuccess)
                return true;
            e->err = rc;
            return true;
        }
    }
    return false;
}

/* The wait predicate: true when the caller should stop waiting (something
 * moved, everything is done, or an error occurred). */
static bool progress(void *p)
{
    engine *e = p;
    if (pass(e) || e->remaining == 0 || e->err != ncclSuccess)
        return true;
    return peers_failed(e);
}

/* Is an unfinished operation waiting on `rank`? (for reports) */
static bool waits_for(void *p, int rank)
{
    engine *e = p;
    for (int i = 0; i < e->nops; i++)
        if (!e->ops[i].complete && e->ops[i].root == rank)
            return true;
    return false;
}

ncclResult_t n4p_exec_p2p(ncclComm_t comm, n4p_op *ops, int nops)
{
    const int n = comm->nranks;
    int last[2 * 64];
    int *lastp = last;
    if (2 * n > (int)(sizeof last / sizeof last[0])) {
        lastp = malloc(sizeof(int) * 2 * (size_t)n);
        if (lastp == NULL)
            return n4p_fail(comm, ncclSystemError, "out of memory");
    }
    for (int i = 0; i < 2 * n; i++)
        lastp[i] = -1;
    for (int i = 0; i < nops; i++) {
        int key = 2 * ops[i].root + (ops[i].kind == N4P_K_RECV);
        ops[i].prev = lastp[key];
        lastp[key] = i;
        ops[i].complete = false;
        ops[i].hdr_done = false;
        ops[i].done_bytes = 0;
    }
    if (lastp != last)
        free(lastp);
    comm->cur_op = nops == 1 ? n4p_kind_name(ops[0].kind) : "grouped ncclSend/ncclRecv";
    comm->opseq++;
    comm->call_epoch = comm->epoch;
    ncclResult_t failed = n4p_check_poison(comm); /* a rank failed earlier */
    if (failed != ncclSuccess)
        return failed;
    for (int i = 0; i < nops; i++) /* a ring's memory, before its first message */
        if (ops[i].kind == N4P_K_SEND && !comm->ring_ready[ops[i].root] &&
            (failed = n4p_space_ring(comm, ops[i].root)) != ncclSuccess) {
            n4p_comm_failed(comm, failed);
            n4p_poison(comm, failed);
            return failed;
        }
    engine e = {comm, ops, nops, nops, n4p_now(), ncclSuccess, {0}};
    if ((failed = n4p_shadow_init(&e.sh, comm, ops, nops)) != ncclSuccess) {
        n4p_comm_failed(comm, failed);
        n4p_poison(comm, failed);
        return failed;
    }
    n4p_waitfor w = {progress, waits_for, &e, N4P_NO_PEER_CHECK, "send/recv"};
    ncclResult_t rc = ncclSuccess;
    while (e.remaining > 0) {
        if ((rc = n4p_wait(comm, &w)) != ncclSuccess)
            break;
        if ((rc = e.err) != ncclSuccess) {
            n4p_comm_failed(comm, rc);
            n4p_poison(comm, rc);
            break;
        }
    }
    n4p_shadow_free(&e.sh);
    if (rc == ncclSuccess)
        comm->cur_op = NULL;
    return rc;
}
