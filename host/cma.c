/*
 * cma.c - single-copy transfers: a rank reads a peer's buffer directly.
 *
 * The staging protocol (rounds.c) copies every byte twice: into the
 * segment, then out.  Linux lets a process read the memory of another
 * process of the same user with process_vm_readv ("cross-memory attach"),
 * unless ptrace restrictions (Yama, seccomp filters of containers) forbid
 * it.  Large all-gathers, all-to-alls and broadcasts use it to copy each
 * byte once, straight from the owner's sendbuff into the reader's recvbuff;
 * large all-reduces to read the peers' inputs and results.
 *
 * Whether it works is probed once per communicator, when every rank has
 * joined: each rank publishes the address of a word of its own memory
 * (n4p_rank_ctl.probe_addr) and reads that word of every peer.  A rank for
 * which a read fails, or returns the wrong value, never offers single copy.
 * The root of a broadcast also writes into its peers' buffers with
 * process_vm_writev (see n4p_cma_push_bytes), which the kernel allows
 * exactly when it allows the read; only a seccomp filter could refuse one
 * and not the other, so the probe also calls process_vm_writev with
 * nothing to write, which such a filter refuses and which touches no
 * memory of the peer.
 *
 * Agreement.  A call that may go single-copy starts with a round in which
 * every rank publishes its buffers' addresses and N4P_DIRECT_OK, or
 * N4P_DIRECT_VETO when it cannot take part (the probe failed, or its
 * buffers overlap in a way that a direct read would see half-written data).
 * The round waits for everybody; the call goes single-copy only when all
 * said OK, else every rank falls back to staging.  Whether a call tries
 * single copy at all (NCCL4PY_HOST_SINGLE_COPY and the size thresholds:
 * policy.c) is compared like the call's other arguments, so ranks
 * configured differently fail with ncclInvalidUsage instead of hanging.
 *
 * Completion.  After its reads a rank arrives at a second round; the owner
 * of a buffer that peers read waits in it for them, so no rank returns (and
 * lets its caller reuse or free the buffer) while a peer still reads it;
 * the receivers of a broadcast wait in it for the root's writes.
 * A failed read (a peer that died or unmapped its buffer) fails the call
 * with ncclRemoteError and poisons the segment, so the peers fail too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport.h"

static ssize_t read_peer(pid_t pid, void *dst, uint64_t src, size_t n)
{
    struct iovec local = {dst, n};
    struct iovec remote = {(void *)(uintptr_t)src, n};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static ssize_t write_peer(pid_t pid, uint64_t dst, const void *src, size_t n)
{
    struct iovec local = {(void *)(uintptr_t)src, n};
    struct iovec remote = {(void *)(uintptr_t)dst, n};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0);
}

void n4p_cma_probe(ncclComm_t c)
{
    c->cma = false;
    if (c->nranks < 2)
        return;
    if (c->env.single_copy == 0) {
        n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: staged "
                "transfers only (NCCL4PY_HOST_SINGLE_COPY=0)", (void *)c, c->rank, c->nranks);
        return;
    }
    const char *why = NULL;
    int bad = -1;
    for (int k = 0; k < c->nranks && why == NULL; k++) {
        const n4p_rank_ctl *p = &c->seg.ranks[k];
        c->pids[k] = p->pid;
        if (k == c->rank)
            continue;
        uint64_t word = 0;
        ssize_t got = read_peer((pid_t)p->pid, &word, p->probe_addr, sizeof word);
        if (got != (ssize_t)sizeof word)
            why = strerror(got < 0 ? errno : EIO), bad = k;
        else if (word != N4P_COMM_MAGIC)
            why = "unexpected data", bad = k;
        else if (write_peer((pid_t)p->pid, p->probe_addr, &word, 0) != 0)
            why = strerror(errno), bad = k;
    }
    c->cma = why == NULL;
    if (c->cma)
        n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: single-copy "
                "transfers (process_vm_readv) for large collectives",
                (void *)c, c->rank, c->nranks);
    else
        n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: staged "
                "transfers only; process_vm_readv/writev of rank %d failed: %s",
                (void *)c, c->rank, c->nranks, bad, why);
}

/* The kernel copies a process_vm_readv with the CPU's string copy, which
 * some CPUs (AMD Zen 3, for one) run at a third to a tenth of its speed
 * when the destination lies a few bytes after the source modulo 4 KiB
 * (n4p_slow_distance, copy.c).  A broadcast's reads and writes at such
 * a distance go through a bounce buffer placed at the source's offset
 * within a page, and from there through n4p_copy, whose speed does not
 * depend on alignment: a second copy, but of data in the cache.  An
 * all-gather, gather or all-to-all with such a read stages instead
 * (direct.c). */
#define BOUNCE_BYTES (256u << 10)
#define PAGE_MASK_4K 4095u

static ncclResult_t alloc_bounce(ncclComm_t c)
{
    if (c->bounce == NULL)
        c->bounce = aligned_alloc(PAGE_MASK_4K + 1, BOUNCE_BYTES + PAGE_MASK_4K + 1);
    return c->bounce != NULL ? ncclSuccess
                             : n4p_fail(c, ncclSystemError, "%s: out of memory", c->cur_op);
}

typedef struct {
    ncclComm_t c;
    int peer;
} report_ctx;

/* Whether the peer has reported a failure (any rank's poison), or arrived at
 * the round after this transfer's, which it does only once its own
 * transfers of this round are done (so it found nothing wrong with its
 * memory), or is itself waiting here in this round (its own memory is fine
 * too: a transfer of its failed on a third rank's buffer, or on this one's;
 * so two ranks never wait for each other). */
static bool peer_decided(void *p)
{
    const report_ctx *r = p;
    const n4p_rank_ctl *q = &r->c->seg.ranks[r->peer];
    return atomic_load_explicit(&r->c->seg.hdr->poison, memory_order_acquire) != 0 ||
           atomic_load_explicit(&q->seq, memory_order_acquire) > r->c->epoch ||
           atomic_load(&q->deciding) == r->c->epoch + 1;
}

static bool peer_undecided(void *p, int rank)
{
    const report_ctx *r = p;
    return rank == r->peer && !peer_decided(p);
}

/* A transfer between this rank's `local` and a peer failed with `e`.  EFAULT
 * does not say whose memory faulted: if this rank's own range cannot be
 * faulted in (a file mapping on a full /dev/shm, say), the error is this
 * rank's.  Otherwise the peer's buffer is bad, or the peer is failing (or has
 * failed and left, taking its buffer along) on its own, in which case its
 * own report, which says which memory and why, is the one to give.  Which of
 * the two is decided by the peer, not by a clock: this rank waits until the
 * peer has reported (the poison) or has arrived at the next round, having
 * finished its own transfers without failing (every rank arrives there
 * without waiting for this one), or is waiting here itself.  A peer that
 * dies meanwhile is a dead peer; the wait ends by NCCL4PY_HOST_TIMEOUT at
 * the latest. */
static ncclResult_t access_failed(ncclComm_t c, bool write, int peer, int e, const void *local,
                                  size_t n)
{
    const int mine = e == EFAULT ? n4p_space_probe(local, n, !write) : 0;
    ncclResult_t rc;
    if (mine == 0) {
        report_ctx r = {c, peer};
        const n4p_waitfor w = {peer_decided, peer_undecided, &r, peer,
                               "a peer's report of its own failure"};
        _Atomic uint64_t *deciding = &c->seg.ranks[c->rank].deciding;
        atomic_store(deciding, c->epoch + 1); /* before reading the peer's: see peer_decided */
        n4p_notify(c);
        rc = n4p_wait(c, &w);
        atomic_store(deciding, 0);
        if (rc != ncclSuccess)
            return rc;
        if ((rc = n4p_check_poison(c)) != ncclSuccess) /* the peer's (or another's) report */
            return rc;
    }
    if (mine != 0)
        rc = n4p_fail(c, ncclSystemError,
                      "%s: this rank's own memory at %p (%zu bytes) cannot be %s (%s), so "
                      "%s rank %d (pid %d) failed",
                      c->cur_op, local, n, write ? "read" : "written",
                      mine == EFAULT ? "a file mapping on a full file system such as "
                                       N4P_SHM_DIR "?" : strerror(mine),
                      write ? "writing to" : "reading from", peer, (int)c->pids[peer]);
    else
        rc = n4p_fail(c, ncclRemoteError, "%s: %s the buffer of rank %d (pid %d) failed: %s",
                      c->cur_op, write ? "writing" : "reading", peer, (int)c->pids[peer],
                      strerror(e));
    n4p_comm_failed(c, rc);
    n4p_poison(c, rc);
    return rc;
}

/* Moves n bytes between `local` and the peer's address `remote`: into local
 * (a read) or out of it (a write).  At an unfavourable distance the kernel
 * copies to or from the bounce buffer, placed at the remote address's
 * offset within a page, and n4p_copy does the rest: with streaming stores
 * when `stream` (a read into a large output, which would otherwise be read
 * into the cache before being overwritten, evicting the data the ranks are
 * about to read). */
static ncclResult_t transfer(ncclComm_t c, int peer, char *local, uint64_t remote, size_t n,
                             bool write, bool stream)
{
    const uint64_t here = (uint64_t)(uintptr_t)local;
    const bool bounce = n > 0 && (write ? n4p_slow_distance(remote, here) : n4p_slow_distance(here, remote));
    if (bounce && alloc_bounce(c) != ncclSuccess)
        return ncclSystemError;
    while (n > 0) {
        size_t want = bounce && n > BOUNCE_BYTES ? BOUNCE_BYTES : n;
        char *buf = bounce ? c->bounce + (remote & PAGE_MASK_4K) : local;
        if (bounce && write)
            n4p_copy(buf, local, want, false);
        const pid_t pid = (pid_t)c->pids[peer];
        ssize_t got =
            write ? write_peer(pid, remote, buf, want) : read_peer(pid, buf, remote, want);
        if (got <= 0) {
            int e = got < 0 ? errno : EIO;
            if (e == EINTR)
                continue;
            return access_failed(c, write, peer, e, buf, want);
        }
        if (bounce && !write)
            n4p_copy(local, buf, (size_t)got, stream);
        local += got, remote += (uint64_t)got, n -= (size_t)got;
    }
    return ncclSuccess;
}

ncclResult_t n4p_cma_read(ncclComm_t c, int peer, void *dst, uint64_t src, size_t n,
                          bool stream)
{
    return transfer(c, peer, dst, src, n, false, stream);
}

size_t n4p_cma_push_bytes(ncclComm_t c, size_t bytes)
{
    /* The receivers of a broadcast would each copy all of it while the root
     * waits for them; the root writes the last 1/nranks of the message into
     * every receiver instead, so that, with a CPU per rank, all ranks copy
     * about as much (the root (n-1)/n of a message, each receiver the rest).
     * A multiple of 4 KiB; nothing for messages under nranks pages. */
    return (bytes / (size_t)c->nranks) & ~(size_t)PAGE_MASK_4K;
}

ncclResult_t n4p_cma_write(ncclComm_t c, int peer, uint64_t dst, const void *src, size_t n)
{
    return transfer(c, peer, (char *)(uintptr_t)src, dst, n, true, false);
}
