/*
 * sync.c - waiting, arrival at rounds and failure detection.
 *
 * Every wait in the backend goes through n4p_wait(): it spins briefly (with
 * a CPU pause; only while every rank has a CPU of its own, and adapted to
 * how long recent waits took, see spin_budget), then yields the CPU, then
 * sleeps on a futex word in the segment header (`wake`) with a short
 * timeout.  Whoever changes state that others may wait for (an arrival at a
 * round, a ring update, a rank leaving) calls n4p_notify(), which bumps the
 * word and wakes sleepers only when some rank is registered as sleeping.
 * The sleeper registers before re-checking its condition, so a wake-up
 * cannot be lost.  Thus 4 ranks on 2 cores still make progress quickly, and
 * idle ranks use no CPU.
 *
 * While sleeping, a waiter looks at its peers about every 100 ms: a peer
 * whose process has disappeared (kill(pid, 0) fails, or /proc says it is a
 * zombie or a different process now owns the pid) turns into ncclRemoteError,
 * a peer that destroyed or aborted its communicator into ncclRemoteError,
 * and a wait longer than NCCL4PY_HOST_TIMEOUT seconds into ncclTimeout.
 * The first rank that fails "poisons" the segment with its code and message
 * (also one whose communicator is aborted while it waits); every other
 * rank's next wait then fails at once with the same code and a message
 * naming the reporting rank, and so does a collective that completed on a
 * peer in the same call (n4p_check_call_outcome).  So a dead or missing rank becomes an
 * error everywhere instead of a hang.
 *
 * Interrupts.  The library runs inside Python with the GIL released, so it
 * cannot raise KeyboardInterrupt itself.  Instead the extension installs a
 * check (nccl4pyHostSetInterruptCheck) that runs the pending Python signal
 * handlers; a waiter calls it every CHECK_PERIOD and at once when a signal
 * cut its futex sleep short (EINTR).  When a handler raised, the wait is
 * abandoned: the communicator fails (ncclSystemError), the segment is
 * poisoned so that the peers fail at once, and the extension finds the
 * raised exception pending when the call returns.  The threads that run one
 * group share a cancel flag, so the whole group stops.
 *
 * Reports.  A wait blocked for NCCL4PY_HOST_WAIT_REPORT seconds (10 by
 * default) prints one line naming the ranks it waits for and the operation,
 * again after 3x and 9x that time, and so on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

#define SPIN_ITERS 64
#define SPIN_SECONDS 20e-6   /* spin (pause) at most this long: the peer is usually close */
#define YIELD_SECONDS 500e-6 /* then yield: lets an oversubscribed peer run */
#define CHECK_PERIOD 0.1     /* seconds between liveness checks */

/* The CPUs this process may run on (its affinity mask). */
static int usable_cpus(void)
{
    static atomic_int cached;
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n == 0) {
        cpu_set_t set;
        long v = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                            : sysconf(_SC_NPROCESSORS_ONLN);
        n = v > 0 ? (int)v : 1;
        atomic_store_explicit(&cached, n, memory_order_relaxed);
    }
    return n;
}

/* How long the next wait spins.  Spinning only pays when every rank has a
 * CPU of its own and the peers arrive within the spin: a wait that ends
 * within SPIN_SECONDS doubles it (up to SPIN_SECONDS), a longer one halves
 * it, so on a machine busy with other work the ranks soon yield at once
 * instead of holding a CPU that the rank they wait for needs. */
static double spin_budget(ncclComm_t comm)
{
    if (!comm->spin_ready) {
        comm->spin = comm->nranks <= usable_cpus() ? SPIN_SECONDS : 0;
        comm->spin_max = comm->spin;
        comm->spin_ready = true;
    }
    return comm->spin;
}

static void spin_adapt(ncclComm_t comm, double waited)
{
    if (waited <= comm->spin_max)
        comm->spin = comm->spin * 2 + 1e-6 < comm->spin_max ? comm->spin * 2 + 1e-6
                                                            : comm->spin_max;
    else
        comm->spin *= 0.5;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

double n4p_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------- interrupts -- */

typedef int (*check_fn)(void);
static _Atomic(check_fn) interrupt_check;
static _Thread_local _Atomic int *tl_cancel; /* shared by the threads of a group */
static _Thread_local bool tl_helper;         /* a thread started by group.c */

/* Installed by the Python extension: called on the thread that entered the
 * library while it waits (every CHECK_PERIOD, and at once when a signal
 * interrupted its sleep); nonzero abandons the wait.  Never called on the
 * library's own helper threads. */
N4P_EXPORT void nccl4pyHostSetInterruptCheck(int (*check)(void));
N4P_EXPORT void nccl4pyHostSetInterruptCheck(int (*check)(void))
{
    atomic_store(&interrupt_check, check);
}

void n4p_set_cancel_flag(_Atomic int *flag, bool helper)
{
    tl_cancel = flag;
    tl_helper = helper;
}

bool n4p_interrupted(void)
{
    if (tl_cancel != NULL && atomic_load_explicit(tl_cancel, memory_order_relaxed))
        return true;
    check_fn f = atomic_load_explicit(&interrupt_check, memory_order_acquire);
    if (tl_helper || f == NULL || f() == 0)
        return false;
    if (tl_cancel != NULL)
        atomic_store(tl_cancel, 1); /* the other threads of the group stop too */
    return true;
}

static bool cancelled(_Atomic int *flag)
{
    return flag != NULL && atomic_load_explicit(flag, memory_order_relaxed);
}

/* ------------------------------------------------------------- waiting -- */

void n4p_notify(ncclComm_t comm)
{
    n4p_seg_hdr *h = comm->seg.hdr;
    /* Order the caller's (release) publication before reading `sleepers`;
     * pairs with the sleeper's increment before its last re-check. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&h->sleepers) != 0) {
        atomic_fetch_add(&h->wake, 1);
        syscall(SYS_futex, (uint32_t *)&h->wake, FUTEX_WAKE, INT_MAX, NULL,
                NULL, 0);
    }
}

/* Wake every waiter of the segment unconditionally (abort, cancel). */
void n4p_wake_all(ncclComm_t comm)
{
    n4p_seg_hdr *h = comm->seg.hdr;
    if (h == NULL)
        return;
    atomic_fetch_add(&h->wake, 1);
    syscall(SYS_futex, (uint32_t *)&h->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep until woken or `seconds` pass; true if a signal interrupted it. */
static bool futex_sleep(ncclComm_t comm, uint32_t seen, double seconds)
{
    if (seconds <= 0)
        return false;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    return syscall(SYS_futex, (uint32_t *)&comm->seg.hdr->wake, FUTEX_WAIT, seen, &ts,
                   NULL, 0) != 0 &&
           errno == EINTR;
}

void n4p_poison(ncclComm_t comm, ncclResult_t rc)
{
    if (comm->seg.hdr == NULL || comm->nranks == 1)
        return;
    n4p_rank_ctl *me = &comm->seg.ranks[comm->rank];
    me->fail_epoch = comm->call_epoch;
    me->errcode = (int32_t)rc;
    snprintf(me->errmsg, sizeof me->errmsg, "%s", comm->errmsg);
    int expected = 0;
    atomic_compare_exchange_strong(&comm->seg.hdr->poison, &expected,
                                   comm->rank + 1);
    n4p_notify(comm);
}

/* A result code read from shared memory, as one this library returns. */
static ncclResult_t remote_code(int32_t code)
{
    if (code <= ncclSuccess || code == ncclInProgress || code > ncclTimeout)
        return ncclRemoteError;
    return (ncclResult_t)code;
}

ncclResult_t n4p_check_poison(ncclComm_t comm)
{
    n4p_seg_hdr *h = comm->seg.hdr;
    int p = atomic_load_explicit(&h->poison, memory_order_acquire);
    if (p == 0)
        return ncclSuccess;
    const char *op = comm->cur_op ? comm->cur_op : "operation";
    if (p == N4P_POISON_HDR) {
        n4p_set_error(comm, "%s failed: %.400s", op, h->errmsg);
        return n4p_comm_failed(comm, remote_code(h->errcode));
    }
    int who = p - 1;
    if (who == comm->rank) {
        int e = atomic_load(&comm->error);
        return e != ncclSuccess ? (ncclResult_t)e : ncclRemoteError;
    }
    if (who < 0 || who >= comm->nranks) {
        n4p_set_error(comm, "%s failed: the shared memory segment is corrupt (poison %d)",
                      op, p);
        return n4p_comm_failed(comm, ncclInternalError);
    }
    n4p_rank_ctl *r = &comm->seg.ranks[who];
    n4p_set_error(comm, "%s failed because rank %d reported an error: %.300s", op, who,
                  r->errmsg);
    return n4p_comm_failed(comm, remote_code(r->errcode));
}

/* At the end of a collective that succeeded on this rank: a peer that failed
 * this same call (its failure's call began at a round this call took part
 * in) fails it here too, so that no call fails on one rank and succeeds on
 * another.  A peer that arrived at this call's last round and was then
 * aborted, interrupted or timed out while waiting poisons the segment before
 * it returns; a rank that arrives after that fails at the call's start
 * (n4p_check_poison), one that was already inside it here.  A peer that
 * failed a later call (it ran ahead) does not fail this one. */
ncclResult_t n4p_check_call_outcome(ncclComm_t comm)
{
    int p = atomic_load_explicit(&comm->seg.hdr->poison, memory_order_acquire);
    if (p == 0)
        return ncclSuccess;
    if (p > 0 && p - 1 != comm->rank && p - 1 < comm->nranks &&
        comm->seg.ranks[p - 1].fail_epoch >= comm->epoch)
        return ncclSuccess;
    return n4p_check_poison(comm);
}

static ncclResult_t check_one(ncclComm_t comm, int p, const char *what)
{
    n4p_rank_ctl *r = &comm->seg.ranks[p];
    int state = atomic_load_explicit(&r->state, memory_order_acquire);
    const char *op = comm->cur_op ? comm->cur_op : "operation";
    if (state == N4P_RANK_LEFT && p != comm->rank)
        return n4p_fail(comm, ncclRemoteError,
                        "rank %d destroyed or aborted the communicator while "
                        "this rank waited for it in %s (%s)",
                        p, op, what);
    if (state == N4P_RANK_JOINED && n4p_process_gone(r->pid, r->starttime))
        return n4p_fail(comm, ncclRemoteError,
                        "rank %d (pid %d) exited or was killed while this rank "
                        "waited for it in %s (%s)",
                        p, (int)r->pid, op, what);
    return ncclSuccess;
}

ncclResult_t n4p_check_peer(ncclComm_t comm, int peer, const char *what)
{
    if (peer >= 0)
        return check_one(comm, peer, what);
    for (int p = 0; p < comm->nranks; p++) {
        ncclResult_t rc = check_one(comm, p, what);
        if (rc != ncclSuccess)
            return rc;
    }
    return ncclSuccess;
}

static ncclResult_t wait_failed(ncclComm_t comm, ncclResult_t rc)
{
    n4p_comm_failed(comm, rc);
    n4p_poison(comm, rc);
    return rc;
}

/* A signal handler raised (Ctrl-C): the communicator is left failed, and
 * the peers learn it through the poison instead of waiting for us. */
static ncclResult_t wait_interrupted(ncclComm_t comm, const n4p_waitfor *w)
{
    n4p_set_error(comm,
                  "%s was interrupted while waiting (%s); the communicator is no longer "
                  "usable: destroy or abort it",
                  comm->cur_op ? comm->cur_op : "operation", w->what);
    n4p_comm_failed(comm, ncclSystemError);
    n4p_poison(comm, ncclRemoteError);
    return ncclSystemError;
}

/* The ranks a wait is for, as "2,3" (shortened when long); their number. */
static int missing_ranks(ncclComm_t comm, const n4p_waitfor *w, char *buf, size_t size)
{
    size_t len = 0;
    int count = 0, shown = 0;
    buf[0] = '\0';
    for (int p = 0; p < comm->nranks && w->missing != NULL; p++) {
        if (p == comm->rank || !w->missing(w->ctx, p))
            continue;
        count++;
        if (len + 24 < size) {
            len += (size_t)snprintf(buf + len, size - len, "%s%d", shown ? "," : "", p);
            shown++;
        }
    }
    if (count > shown)
        snprintf(buf + len, size - len, " and %d more", count - shown);
    return count;
}

/* "nccl4py host: rank 0 of 4 waiting 10 s for ranks 2,3 in ncclAllReduce #5 (comm 0x...)" */
static void report_wait(ncclComm_t comm, const n4p_waitfor *w, double after)
{
    char list[200], seq[32] = "", secs[32];
    int count = missing_ranks(comm, w, list, sizeof list);
    if (comm->opseq > 0)
        snprintf(seq, sizeof seq, " #%llu", (unsigned long long)comm->opseq);
    snprintf(secs, sizeof secs, after >= 10 ? "%.0f" : "%g", after);
    n4p_say("rank %d of %d waiting %s s%s%s in %s%s (comm %p)", comm->rank, comm->nranks,
            secs, count == 0 ? "" : count == 1 ? " for rank " : " for ranks ", list,
            comm->cur_op ? comm->cur_op : "an operation", seq, (void *)comm);
}

/* Publish what this wait is for (see nccl4pyHostWaitState). */
static void publish_wait(ncclComm_t comm, const n4p_waitfor *w, double start, double now)
{
    atomic_fetch_add_explicit(&comm->wait_gen, 1, memory_order_acq_rel);
    (void)missing_ranks(comm, w, comm->wait_ranks, sizeof comm->wait_ranks);
    atomic_store_explicit(&comm->wait_start, start, memory_order_relaxed);
    atomic_store_explicit(&comm->wait_stamp, now, memory_order_relaxed);
    atomic_fetch_add_explicit(&comm->wait_gen, 1, memory_order_release);
}

/* For a watchdog on another thread: 1 when a thread of comm has been waiting
 * in the library within the last second (*waited: for how long so far;
 * ranks: whom it waits for, as "2,3"), else 0.  comm must stay valid during
 * the call. */
N4P_EXPORT int nccl4pyHostWaitState(ncclComm_t comm, double *waited, char *ranks, size_t size);
N4P_EXPORT int nccl4pyHostWaitState(ncclComm_t comm, double *waited, char *ranks, size_t size)
{
    if (comm == NULL || comm->magic != N4P_COMM_MAGIC || size == 0)
        return 0;
    for (int tries = 0; tries < 100; tries++) {
        unsigned g = atomic_load_explicit(&comm->wait_gen, memory_order_acquire);
        if (g & 1u) {
            sched_yield();
            continue;
        }
        double start = atomic_load_explicit(&comm->wait_start, memory_order_relaxed);
        double stamp = atomic_load_explicit(&comm->wait_stamp, memory_order_relaxed);
        snprintf(ranks, size, "%.*s", (int)sizeof comm->wait_ranks - 1, comm->wait_ranks);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&comm->wait_gen, memory_order_relaxed) != g)
            continue;
        double now = n4p_now();
        if (stamp <= 0 || now - stamp > 1.0 || atomic_load(&comm->busy) == 0)
            return 0;
        *waited = now - start;
        return 1;
    }
    return 0;
}

static ncclResult_t wait_timed_out(ncclComm_t comm, const n4p_waitfor *w)
{
    char list[200];
    int count = missing_ranks(comm, w, list, sizeof list);
    n4p_set_error(comm,
                  "timed out after %.3g s in %s (%s%s%s%s); set NCCL4PY_HOST_TIMEOUT to "
                  "change the limit",
                  comm->env.timeout, comm->cur_op ? comm->cur_op : "operation", w->what,
                  count ? "; missing: rank" : "", count > 1 ? "s " : count ? " " : "", list);
    return wait_failed(comm, ncclTimeout);
}

ncclResult_t n4p_wait(ncclComm_t comm, const n4p_waitfor *w)
{
    if (w->done(w->ctx))
        return ncclSuccess;
    n4p_seg_hdr *h = comm->seg.hdr;
    const double start = n4p_now();
    const double spin_seconds = spin_budget(comm);
    const double deadline = comm->env.timeout > 0 ? start + comm->env.timeout : 0;
    const char *op = comm->cur_op ? comm->cur_op : "operation";
    double report_after = comm->env.wait_report;
    double last_check = start;
    _Atomic int *const cancel = tl_cancel; /* read once: thread-locals cost a call here */
    for (unsigned iter = 0;; iter++) {
        if (w->done(w->ctx)) {
            spin_adapt(comm, n4p_now() - start);
            return ncclSuccess;
        }
        if (atomic_load_explicit(&comm->aborted, memory_order_relaxed)) {
            /* what this rank published of the call (its arrival, its data)
             * must not let a peer complete it: the poison fails them */
            n4p_set_error(comm, "the communicator was aborted while %s waited", op);
            n4p_comm_failed(comm, ncclInvalidUsage);
            n4p_poison(comm, ncclRemoteError);
            return ncclInvalidUsage;
        }
        if (atomic_load_explicit(&h->poison, memory_order_relaxed) != 0) {
            if (w->done(w->ctx))
                return ncclSuccess;
            return n4p_check_poison(comm);
        }
        if (cancelled(cancel))
            return wait_interrupted(comm, w);
        if (iter % SPIN_ITERS != 0) {
            cpu_relax();
            continue;
        }
        double now = n4p_now();
        if (now - start < spin_seconds) {
            cpu_relax();
            continue;
        }
        if (now - start < YIELD_SECONDS) {
            sched_yield();
            iter += SPIN_ITERS - 1; /* one clock read per yield */
            continue;
        }
        if (now - last_check >= CHECK_PERIOD) {
            /* also without a peer to check: the nap below is measured from
             * here, so a wait keeps sleeping in 100 ms naps */
            last_check = now;
            if (n4p_interrupted()) /* even when done: the caller must fail */
                return wait_interrupted(comm, w);
            if (w->peer != N4P_NO_PEER_CHECK) {
                ncclResult_t rc = n4p_check_peer(comm, w->peer, w->what);
                if (rc != ncclSuccess)
                    return w->done(w->ctx) ? ncclSuccess : wait_failed(comm, rc);
            }
            publish_wait(comm, w, start, now);
            if (report_after > 0 && now - start >= report_after) {
                report_wait(comm, w, report_after);
                report_after *= 3;
            }
        }
        if (deadline > 0 && now > deadline)
            return w->done(w->ctx) ? ncclSuccess : wait_timed_out(comm, w);
        double nap = CHECK_PERIOD - (now - last_check);
        if (deadline > 0 && deadline - now < nap)
            nap = deadline - now;
        if (nap < 1e-4)
            nap = 1e-4;
        uint32_t seen = atomic_load(&h->wake);
        atomic_fetch_add(&h->sleepers, 1);
        if (!w->done(w->ctx) && atomic_load(&h->poison) == 0 &&
            !atomic_load(&comm->aborted) && !cancelled(cancel) && futex_sleep(comm, seen, nap))
            last_check = now - CHECK_PERIOD; /* a signal: ask about it at once */
        atomic_fetch_sub(&h->sleepers, 1);
    }
}

typedef struct {
    ncclComm_t comm;
    int peer;
    uint64_t target;
} seq_ctx;

static bool seq_reached(void *p)
{
    seq_ctx *c = p;
    return atomic_load_explicit(&c->comm->seg.ranks[c->peer].seq,
                                memory_order_acquire) >= c->target;
}

static bool seq_missing(void *p, int rank)
{
    seq_ctx *c = p;
    return atomic_load_explicit(&c->comm->seg.ranks[rank].seq, memory_order_acquire) <
           c->target;
}

/* Arrive at the next round: publish everything written so far. */
void n4p_arrive(ncclComm_t comm)
{
    atomic_store_explicit(&comm->seg.ranks[comm->rank].seq, ++comm->epoch,
                          memory_order_release);
    n4p_notify(comm);
}

/* Wait until rank `peer`, or every rank (N4P_ALL), has seq >= target, i.e.
 * has arrived at round target - 1. */
ncclResult_t n4p_wait_arrived(ncclComm_t comm, int peer, uint64_t target, const char *what)
{
    seq_ctx c = {comm, 0, target};
    n4p_waitfor w = {seq_reached, seq_missing, &c, 0, what};
    for (int k = peer == N4P_ALL ? 0 : peer; k < (peer == N4P_ALL ? comm->nranks : peer + 1);
         k++) {
        if (k == comm->rank)
            continue;
        c.peer = w.peer = k;
        ncclResult_t rc = n4p_wait(comm, &w);
        if (rc != ncclSuccess)
            return rc;
    }
    return ncclSuccess;
}

static bool all_joined(void *p)
{
    ncclComm_t comm = p;
    return atomic_load_explicit(&comm->seg.hdr->joined, memory_order_acquire) >=
           comm->nranks;
}

static bool not_joined(void *p, int rank)
{
    ncclComm_t comm = p;
    int s = atomic_load_explicit(&comm->seg.ranks[rank].state, memory_order_acquire);
    return s == N4P_RANK_EMPTY || s < 0;
}

ncclResult_t n4p_wait_joined(ncclComm_t comm)
{
    n4p_waitfor w = {all_joined, not_joined, comm, -1, "waiting for the ranks to join"};
    return n4p_wait(comm, &w);
}
