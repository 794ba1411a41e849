/*
 * p2p_overlap.c - sends and receives of one group whose buffers overlap.
 *
 * As in NCCL, a send carries what its buffer holds when the group's sends
 * and receives start, and a receive writes its buffer.  The common case is
 * nccl-tests' in-place sendrecv: every rank sends its buffer to the next
 * rank and receives from the previous one into the same buffer.  The
 * engine (p2p.c) moves a message through a ring of limited size, so a
 * receive may come to write bytes that a send of the same rank has not yet
 * copied into its ring (a message larger than the ring, a ring still
 * holding earlier messages, a peer that is ahead).  Making the receive wait
 * for the send instead can deadlock (a self-send into its own source
 * shifted by more than the ring), so those bytes are copied aside first:
 * copy-on-write.
 *
 * Regions.  Before anything moves, n4p_shadow_init intersects the union of
 * the sends' sources with the union of the receives' destinations (both
 * sorted: n log n).  The memory for a copy of every region is allocated at
 * once, so that its lack fails the call before any byte has moved; pages
 * never written cost nothing.  A receive writes a region in order, piece by
 * piece as its ring delivers them; before each piece, the part of it that a
 * send has yet to read is copied aside, and the sends read what the
 * receive has already written from the copies.  As a send usually runs
 * ahead of the receive into its own buffer (by up to its ring), most
 * pieces need no copy: in nccl-tests' in-place sendrecv, only those that a
 * receive gets before its rank's send has moved them.
 *
 * Refused (n4p_overlap_check_group, over the whole group before any of it
 * runs): two receives writing overlapping memory (NCCL defines no order
 * between them, so the result would depend on timing), and a send reading
 * memory that a receive on another communicator of the group writes (the
 * communicators of a group run concurrently, so what the send would carry
 * is not defined).  Sends may overlap each other in any way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "p2p_overlap.h"

typedef struct {
    uintptr_t lo, hi; /* the bytes an operation reads or writes, [lo, hi) */
    int op;           /* its index */
} span;

#define STACK_SPANS 32

static size_t op_len(const n4p_op *o)
{
    return o->count * n4p_dtype_size(o->dtype);
}

static int by_address(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

/* The operations of `kind` that carry bytes, as spans sorted by address;
 * their number. */
static int spans_of(const n4p_op *ops, int nops, int kind, span *out)
{
    int k = 0;
    for (int i = 0; i < nops; i++) {
        size_t len = ops[i].kind == kind ? op_len(&ops[i]) : 0;
        if (len == 0)
            continue;
        uintptr_t lo = (uintptr_t)(kind == N4P_K_SEND ? ops[i].sendbuff
                                                        : (const void *)ops[i].recvbuff);
        uintptr_t hi = len > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + len;
        out[k++] = (span){lo, hi, i};
    }
    if (k > 1)
        qsort(out, (size_t)k, sizeof *out, by_address);
    return k;
}

/* The first of `n` disjoint spans sorted by address that ends after `a`. */
static int first_ending_after(const span *sp, int n, uintptr_t a)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sp[mid].hi > a)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int count_p2p(const n4p_op *ops, int nops)
{
    int n = 0;
    for (int i = 0; i < nops; i++)
        n += ops[i].kind == N4P_K_SEND || ops[i].kind == N4P_K_RECV;
    return n;
}

/* For a group of a few sends and receives (the common one: a send and a
 * receive), whether no receive overlaps another operation, without sorting. */
#define FEW 8

static bool few_apart(const n4p_op *ops, int nops)
{
    span sp[FEW];
    bool recv[FEW];
    int k = 0;
    for (int i = 0; i < nops; i++) {
        size_t len = op_len(&ops[i]);
        if ((ops[i].kind != N4P_K_SEND && ops[i].kind != N4P_K_RECV) || len == 0)
            continue;
        if (k == FEW)
            return false;
        recv[k] = ops[i].kind == N4P_K_RECV;
        uintptr_t lo = (uintptr_t)(recv[k] ? (const void *)ops[i].recvbuff : ops[i].sendbuff);
        sp[k++] = (span){lo, len > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + len, i};
    }
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++)
            if ((recv[i] || recv[j]) && sp[i].lo < sp[j].hi && sp[j].lo < sp[i].hi)
                return false;
    return true;
}

/* ----------------------------------------------------------- refusals -- */

static ncclResult_t refuse_recvs(const n4p_op *ops, span a, span b)
{
    const n4p_op *x = &ops[a.op], *y = &ops[b.op];
    return n4p_fail(y->comm, ncclInvalidUsage,
                    "ncclRecv of %zu bytes at %p from rank %d and ncclRecv of %zu bytes at "
                    "%p from rank %d%s in one group write overlapping memory; which data "
                    "would remain depends on timing, so the group is refused",
                    op_len(x), x->recvbuff, x->root, op_len(y), y->recvbuff, y->root,
                    x->comm == y->comm ? "" : " (another communicator)");
}

static ncclResult_t refuse_across(const n4p_op *ops, span send, span recv)
{
    const n4p_op *s = &ops[send.op], *r = &ops[recv.op];
    return n4p_fail(s->comm, ncclInvalidUsage,
                    "ncclSend of %zu bytes at %p to rank %d reads memory that ncclRecv of "
                    "%zu bytes at %p from rank %d writes on another communicator of the "
                    "same group; the communicators of a group run concurrently, so the "
                    "data sent would be undefined: the group is refused",
                    op_len(s), s->sendbuff, s->root, op_len(r), r->recvbuff, r->root);
}

ncclResult_t n4p_overlap_check_group(const n4p_op *ops, int nops)
{
    int np = count_p2p(ops, nops);
    if (np < 2 || (np <= FEW && few_apart(ops, nops)))
        return ncclSuccess;
    span stack[STACK_SPANS];
    span *sp = np <= STACK_SPANS ? stack : malloc(sizeof *sp * (size_t)np);
    if (sp == NULL)
        return n4p_fail(NULL, ncclSystemError, "out of memory");
    const int nr = spans_of(ops, nops, N4P_K_RECV, sp);
    span *sends = sp + nr;
    const int ns = spans_of(ops, nops, N4P_K_SEND, sends);
    ncclResult_t rc = ncclSuccess;
    /* sorted by start, disjoint receives each start after the previous end */
    for (int i = 1; i < nr && rc == ncclSuccess; i++)
        if (sp[i].lo < sp[i - 1].hi)
            rc = refuse_recvs(ops, sp[i - 1], sp[i]);
    for (int i = 0; i < ns && rc == ncclSuccess; i++)
        for (int j = first_ending_after(sp, nr, sends[i].lo);
             j < nr && sp[j].lo < sends[i].hi && rc == ncclSuccess; j++)
            if (ops[sp[j].op].comm != ops[sends[i].op].comm)
                rc = refuse_across(ops, sends[i], sp[j]);
    if (sp != stack)
        free(sp);
    return rc;
}

/* ------------------------------------------------------ copy-on-write -- */

/* Merge the sorted spans sp[0..n) that overlap into disjoint ones, in
 * place; their number. */
static int merge(span *sp, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k > 0 && sp[i].lo < sp[k - 1].hi) {
            if (sp[i].hi > sp[k - 1].hi)
                sp[k - 1].hi = sp[i].hi;
        } else {
            sp[k++] = sp[i];
        }
    }
    return k;
}

ncclResult_t n4p_shadow_init(n4p_shadow *s, ncclComm_t comm, const n4p_op *ops, int nops)
{
    *s = (n4p_shadow){.ops = ops};
    int np = count_p2p(ops, nops);
    if (np < 2 || (np <= FEW && few_apart(ops, nops)))
        return ncclSuccess;
    span stack[STACK_SPANS];
    span *sp = np <= STACK_SPANS ? stack : malloc(sizeof *sp * (size_t)np);
    if (sp == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    int nr = spans_of(ops, nops, N4P_K_RECV, sp);
    span *sends = sp + nr;
    const int ns = spans_of(ops, nops, N4P_K_SEND, sends);
    nr = merge(sp, nr);
    ncclResult_t rc = ncclSuccess;
    /* A region lies in one run of overlapping sources and one destination:
     * at most (runs + destinations - 1) of them. */
    n4p_region *reg = NULL;
    int nreg = 0;
    size_t total = 0;
    for (int i = 0; i < ns;) {
        int j = i + 1;
        uintptr_t lo = sends[i].lo, hi = sends[i].hi;
        for (; j < ns && sends[j].lo < hi; j++)
            if (sends[j].hi > hi)
                hi = sends[j].hi;
        for (int r = first_ending_after(sp, nr, lo); r < nr && sp[r].lo < hi; r++) {
            if (reg == NULL && (reg = malloc(sizeof *reg * (size_t)(ns + nr))) == NULL) {
                rc = n4p_fail(comm, ncclSystemError, "out of memory");
                goto out;
            }
            uintptr_t a = sp[r].lo > lo ? sp[r].lo : lo, b = sp[r].hi < hi ? sp[r].hi : hi;
            reg[nreg++] = (n4p_region){a, b, a, NULL, i, j - i};
            total += b - a;
        }
        i = j;
    }
    if (nreg == 0)
        goto out;
    s->order = malloc(sizeof *s->order * (size_t)ns);
    s->block = malloc(total);
    if (s->order == NULL || s->block == NULL) {
        free(s->order);
        free(s->block);
        free(reg);
        *s = (n4p_shadow){.ops = ops};
        rc = n4p_fail(comm, ncclSystemError,
                      "out of memory: %zu bytes to keep the data of sends whose source "
                      "receives of the same group overwrite", total);
        goto out;
    }
    for (int k = 0; k < ns; k++)
        s->order[k] = sends[k].op;
    size_t off = 0;
    for (int k = 0; k < nreg; k++) {
        reg[k].shadow = s->block + off;
        off += reg[k].hi - reg[k].lo;
    }
    s->regions = reg;
    s->nregions = nreg;
out:
    if (sp != stack)
        free(sp);
    return rc;
}

void n4p_shadow_free(n4p_shadow *s)
{
    free(s->regions);
    free(s->order);
    free(s->block);
    *s = (n4p_shadow){.ops = s->ops};
}

/* The first region that ends after `a`. */
static int region_after(const n4p_shadow *s, uintptr_t a)
{
    int lo = 0, hi = s->nregions;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->regions[mid].hi > a)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void n4p_shadow_before_write(n4p_shadow *s, const void *dst, size_t len)
{
    const uintptr_t a = (uintptr_t)dst, b = a + len;
    for (int i = region_after(s, a); i < s->nregions && s->regions[i].lo < b; i++) {
        n4p_region *g = &s->regions[i];
        uintptr_t from = a > g->lo ? a : g->lo, to = b < g->hi ? b : g->hi;
        /* keep [need, to): from the lowest byte of the piece a send still reads */
        uintptr_t need = to;
        for (int k = g->first; k < g->first + g->count; k++) {
            const n4p_op *o = &s->ops[s->order[k]];
            uintptr_t next = (uintptr_t)o->sendbuff + (uintptr_t)o->done_bytes;
            uintptr_t end = (uintptr_t)o->sendbuff + op_len(o);
            if (next < end && next < need && end > from)
                need = next > from ? next : from;
        }
        if (need < to)
            n4p_copy(g->shadow + (need - g->lo), (const void *)need, to - need, false);
        if (to > g->written)
            g->written = to;
    }
}

const char *n4p_shadow_source(const n4p_shadow *s, const char *src, size_t len,
                              size_t *piece)
{
    const uintptr_t a = (uintptr_t)src;
    int i = region_after(s, a);
    *piece = len;
    if (i == s->nregions)
        return src;
    const n4p_region *g = &s->regions[i];
    /* below the region, above what its receive wrote: the caller's memory */
    uintptr_t edge = a < g->lo ? g->lo : a < g->written ? g->written : g->hi;
    if (edge - a < len)
        *piece = edge - a;
    /* written by the receive: what the sends needed of it was kept (a send
     * reads at or above its progress, which the copy started from) */
    return a >= g->lo && a < g->written ? g->shadow + (a - g->lo) : src;
}
