/*
 * group.c - ncclGroupStart / ncclGroupEnd and deferred execution.
 *
 * Group state is per thread, as in NCCL.  Between ncclGroupStart and the
 * matching outermost ncclGroupEnd (nesting only counts depth), collectives,
 * sends, receives, splits, shrinks and the join step of ncclCommInitRank are
 * queued; outside a group each call runs at once.
 *
 * At the outermost ncclGroupEnd the queue is split by communicator.  For each
 * communicator: first the pending join (if the communicator was created in
 * this group), then its collectives / split / shrink in issue order, then all
 * its sends and receives as one batch (p2p.c).  Running the point-to-point
 * batch after the collectives is one fixed order that every rank follows, so
 * mixing both kinds in one group cannot deadlock.  When the group touches
 * several communicators, each communicator's work runs on its own thread and
 * ncclGroupEnd waits for all of them: several ranks driven by one thread
 * (ncclCommInitAll) can therefore take part in the same collective.
 *
 * If a call inside the group fails its argument checks, it returns the error
 * and ncclGroupEnd discards the whole group and returns that error, like
 * NCCL.  A group whose sends and receives overlap in a way that has no
 * defined result (p2p_overlap.c) is refused before any of it runs, and its
 * communicators fail, so that their peers do not wait for it.
 * ncclGroupSimulateEnd closes the group without running any data operation
 * (communicator creation still completes) and reports an estimate of the
 * time the operations would take.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p_overlap.h"
#include "queue.h"

typedef struct {
    int depth;
    n4p_op *ops;
    int nops;
    int cap;
    ncclResult_t err;
    char errmsg[N4P_ERRLEN];
} group_state;

static _Thread_local group_state g;

bool n4p_in_group(void)
{
    return g.depth > 0;
}

static void op_release(n4p_op *o)
{
    /* Each op's arrays are released once: ncclGroupSimulateEnd compacts the
     * kept ops to the front (slot j < k ends up holding the j-th kept op) and
     * releases only those; clang-analyzer loses track of the compaction. */
    free(o->v); /* NOLINT(clang-analyzer-unix.Malloc) */
    free(o->exclude);
    free(o->grow_id);
    o->v = NULL;
    o->exclude = NULL;
    o->grow_id = NULL;
}

static bool has(const n4p_op *o, int trait)
{
    return (n4p_kind_traits(o->kind) & trait) != 0;
}

static bool is_p2p(const n4p_op *o)
{
    return has(o, N4P_KT_P2P);
}

/* The threads that run one group: the caller runs the first communicator's
 * work itself, one helper thread runs each other's.  They share a cancel
 * flag: when the caller is interrupted (n4p_interrupted), every wait of the
 * group stops. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int running; /* helper threads not finished */
    _Atomic int cancel;
} group_run;

typedef struct {
    ncclComm_t comm;
    n4p_op *ops; /* every op of the group; only those of `comm` are run */
    int nops;
    ncclResult_t rc;
    char errmsg[N4P_ERRLEN];
    group_run *run;
} job;

static ncclResult_t run_comm_ops(ncclComm_t comm, n4p_op *ops, int nops)
{
    ncclResult_t rc = ncclSuccess;
    int np = 0;
    for (int i = 0; i < nops && rc == ncclSuccess; i++)
        if (ops[i].comm == comm && has(&ops[i], N4P_KT_JOIN))
            rc = n4p_run_op(&ops[i]);
    for (int i = 0; i < nops; i++) {
        n4p_op *o = &ops[i];
        if (o->comm != comm || has(o, N4P_KT_JOIN))
            continue;
        if (is_p2p(o)) {
            np++;
            continue;
        }
        if (rc != ncclSuccess && !has(o, N4P_KT_RESCUE))
            continue;
        ncclResult_t r = n4p_run_op(o);
        if (rc == ncclSuccess)
            rc = r;
    }
    if (np > 0 && rc == ncclSuccess) {
        n4p_op *p2p = malloc(sizeof *p2p * (size_t)np);
        if (p2p == NULL)
            return n4p_fail(comm, ncclSystemError, "out of memory");
        int k = 0;
        for (int i = 0; i < nops; i++)
            if (ops[i].comm == comm && is_p2p(&ops[i]))
                p2p[k++] = ops[i];
        rc = n4p_exec_p2p(comm, p2p, np);
        free(p2p);
    }
    return rc;
}

/* Run the operations of one communicator.  `busy` tells ncclCommAbort,
 * called from another thread, to wait until we no longer touch the comm;
 * decrementing it is our last access. */
static ncclResult_t run_comm(ncclComm_t comm, n4p_op *ops, int nops, char *errmsg)
{
    atomic_fetch_add(&comm->busy, 1);
    ncclResult_t rc = run_comm_ops(comm, ops, nops);
    if (rc != ncclSuccess && errmsg != NULL) /* this thread's: a split, shrink or grow
                                                records it on the new communicator */
        memcpy(errmsg, n4p_thread_error(), N4P_ERRLEN);
    atomic_fetch_sub(&comm->busy, 1);
    return rc;
}

static void *job_main(void *arg)
{
    job *j = arg;
    n4p_set_cancel_flag(&j->run->cancel, true);
    j->rc = run_comm(j->comm, j->ops, j->nops, j->errmsg);
    n4p_set_cancel_flag(NULL, false);
    pthread_mutex_lock(&j->run->lock);
    j->run->running--;
    pthread_cond_signal(&j->run->done);
    pthread_mutex_unlock(&j->run->lock);
    return NULL;
}

/* Wait for the helper threads, asking about interrupts meanwhile; once the
 * group is cancelled, wake the helpers' waits so that they see it. */
static void wait_helpers(group_run *run, job *jobs, int njobs)
{
    bool woken = false;
    pthread_mutex_lock(&run->lock);
    while (run->running > 0) {
        if (!woken && atomic_load(&run->cancel)) {
            for (int k = 1; k < njobs; k++)
                n4p_wake_all(jobs[k].comm);
            woken = true;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&run->done, &run->lock, &ts);
        if (run->running > 0 && !woken) {
            pthread_mutex_unlock(&run->lock);
            n4p_interrupted(); /* sets the cancel flag when interrupted */
            pthread_mutex_lock(&run->lock);
        }
    }
    pthread_mutex_unlock(&run->lock);
}

/* Run a list of operations (the content of a group, or one call). */
static ncclResult_t run_ops(n4p_op *ops, int nops)
{
    if (nops == 0)
        return ncclSuccess;
    if (nops == 1) /* one call outside a group: no thread, no bookkeeping */
        return run_comm(ops[0].comm, ops, 1, NULL);
    int njobs = 0;
    job *jobs = calloc((size_t)nops, sizeof *jobs);
    if (jobs == NULL)
        return n4p_fail(NULL, ncclSystemError, "out of memory");
    group_run run = {.running = 0};
    for (int i = 0; i < nops; i++) {
        int k;
        for (k = 0; k < njobs; k++)
            if (jobs[k].comm == ops[i].comm)
                break;
        if (k == njobs) {
            jobs[njobs].comm = ops[i].comm;
            jobs[njobs].ops = ops;
            jobs[njobs].nops = nops;
            jobs[njobs].run = &run;
            njobs++;
        }
    }
    ncclResult_t rc = ncclSuccess;
    if (njobs == 1) {
        rc = run_comm(jobs[0].comm, ops, nops, NULL);
        free(jobs);
        return rc;
    }
    pthread_t *tids = calloc((size_t)njobs, sizeof *tids);
    bool *started = calloc((size_t)njobs, sizeof *started);
    if (tids == NULL || started == NULL) {
        free(tids);
        free(started);
        free(jobs);
        return n4p_fail(NULL, ncclSystemError, "out of memory");
    }
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.done, NULL);
    atomic_init(&run.cancel, 0);
    for (int k = 1; k < njobs; k++) {
        pthread_mutex_lock(&run.lock);
        run.running++;
        pthread_mutex_unlock(&run.lock);
        started[k] = pthread_create(&tids[k], NULL, job_main, &jobs[k]) == 0;
        if (!started[k]) {
            pthread_mutex_lock(&run.lock);
            run.running--;
            pthread_mutex_unlock(&run.lock);
        }
    }
    n4p_set_cancel_flag(&run.cancel, false);
    jobs[0].rc = run_comm(jobs[0].comm, ops, nops, jobs[0].errmsg);
    wait_helpers(&run, jobs, njobs);
    for (int k = 1; k < njobs; k++) {
        if (started[k])
            pthread_join(tids[k], NULL);
        else /* could not start a thread: best effort */
            jobs[k].rc = run_comm(jobs[k].comm, ops, nops, jobs[k].errmsg);
    }
    n4p_set_cancel_flag(NULL, false);
    if (atomic_load(&run.cancel) && jobs[0].rc == ncclSuccess) /* interrupted at the end */
        jobs[0].rc = n4p_fail(jobs[0].comm, ncclSystemError,
                              "the group was interrupted while waiting");
    for (int k = 0; k < njobs; k++) {
        if (jobs[k].rc != ncclSuccess && rc == ncclSuccess) {
            rc = jobs[k].rc;
            n4p_set_error_text(jobs[k].errmsg);
        }
    }
    pthread_cond_destroy(&run.done);
    pthread_mutex_destroy(&run.lock);
    free(tids);
    free(started);
    free(jobs);
    return rc;
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
    memcpy(o.tag, comm->call_tag, sizeof o.tag); /* calltag.c */
    return n4p_submit(&o);
}

/* Run `o` now, or queue it until the outermost ncclGroupEnd.  Either way
 * it owns the op's arrays (v, exclude) from here on, also when it fails. */
ncclResult_t n4p_submit(const n4p_op *o)
{
    if (g.depth == 0) {
        n4p_op copy = *o;
        ncclResult_t rc = run_ops(&copy, 1);
        op_release(&copy);
        return rc;
    }
    if (g.nops == g.cap) {
        int cap = g.cap ? 2 * g.cap : 16;
        n4p_op *grown = realloc(g.ops, sizeof *grown * (size_t)cap);
        if (grown == NULL) {
            n4p_op copy = *o;
            op_release(&copy);
            return n4p_fail(o->comm, ncclSystemError, "out of memory");
        }
        g.ops = grown;
        g.cap = cap;
    }
    g.ops[g.nops++] = *o;
    return ncclSuccess;
}

static void clear_queue(void)
{
    for (int i = 0; i < g.nops; i++)
        op_release(&g.ops[i]);
    free(g.ops);
    g.ops = NULL;
    g.nops = g.cap = 0;
    g.err = ncclSuccess;
    g.errmsg[0] = '\0';
}

N4P_EXPORT ncclResult_t ncclGroupStart(void)
{
    if (g.depth == 0) {
        g.err = ncclSuccess;
        g.errmsg[0] = '\0';
    }
    g.depth++;
    return ncclSuccess;
}

/* Operation entry points pass their result through here: inside a group
 * the first failure is remembered and fails the whole group. */
ncclResult_t n4p_group_note(ncclResult_t rc)
{
    if (g.depth > 0 && g.err == ncclSuccess && rc != ncclSuccess &&
        rc != ncclInProgress) {
        g.err = rc;
        memcpy(g.errmsg, n4p_thread_error(), sizeof g.errmsg);
    }
    return rc;
}

static ncclResult_t discard_failed_group(void)
{
    ncclResult_t rc = g.err;
    for (int i = 0; i < g.nops; i++)
        if (has(&g.ops[i], N4P_KT_JOIN))
            n4p_comm_failed(g.ops[i].comm, rc);
    n4p_set_error_text(g.errmsg);
    clear_queue();
    return rc;
}

/* A group refused before any of it ran: the peers would wait for its
 * operations until they time out, so every communicator it touches fails
 * with the refusal, which the peers learn at once. */
static ncclResult_t refuse_group(n4p_op *ops, int nops, ncclResult_t rc)
{
    char text[N4P_ERRLEN];
    memcpy(text, n4p_thread_error(), sizeof text);
    for (int i = 0; i < nops; i++) {
        ncclComm_t c = ops[i].comm;
        bool seen = false, joining = false;
        for (int k = 0; k < nops; k++) {
            seen |= k < i && ops[k].comm == c;
            joining |= ops[k].comm == c && has(&ops[k], N4P_KT_JOIN);
        }
        if (seen)
            continue;
        n4p_comm_failed(c, rc);
        if (!joining) { /* one being created has no place in the segment yet */
            snprintf(c->errmsg, sizeof c->errmsg, "%s", text);
            n4p_poison(c, rc);
        }
    }
    n4p_set_error_text(text);
    return rc;
}

N4P_EXPORT ncclResult_t ncclGroupEnd(void)
{
    if (g.depth == 0)
        return n4p_fail(NULL, ncclInvalidUsage,
                        "ncclGroupEnd called without a matching ncclGroupStart");
    if (--g.depth > 0)
        return ncclSuccess;
    if (g.err != ncclSuccess)
        return discard_failed_group();
    /* Take the queue first: the operations may not touch it. */
    n4p_op *ops = g.ops;
    int nops = g.nops;
    g.ops = NULL;
    g.nops = g.cap = 0;
    ncclResult_t rc = n4p_overlap_check_group(ops, nops);
    rc = rc == ncclSuccess ? run_ops(ops, nops) : refuse_group(ops, nops, rc);
    for (int i = 0; i < nops; i++)
        op_release(&ops[i]);
    free(ops);
    return rc;
}

static double estimate_us(const n4p_op *o)
{
    const n4p_kind *k = n4p_kind_of(o->kind);
    if (k->traits & N4P_KT_COMM)
        return 0;
    size_t n = (size_t)o->comm->nranks;
    size_t bytes = o->count * n4p_dtype_size(o->dtype);
    if (n4p_kind_scales(k)) /* a buffer of count * nranks elements */
        bytes *= n;
    /* A few microseconds per round plus about 5 GB/s of copying. */
    return 5.0 + (double)bytes / 5e3;
}

N4P_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (simInfo == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "simInfo is NULL");
    if (simInfo->size < offsetof(ncclSimInfo_t, version) ||
        simInfo->magic != NCCL_SIM_INFO_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclSimInfo_t was not initialised (bad size or magic)");
    if (g.depth == 0)
        return n4p_fail(NULL, ncclInvalidUsage,
                        "ncclGroupSimulateEnd called without ncclGroupStart");
    double us = 0;
    for (int i = 0; i < g.nops; i++)
        us += estimate_us(&g.ops[i]);
    if (simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
        simInfo->estimatedTime = (float)us;
    if (--g.depth > 0)
        return ncclSuccess;
    if (g.err != ncclSuccess)
        return discard_failed_group();
    /* Keep communicator creation, drop the data operations. */
    n4p_op *ops = g.ops;
    int nops = g.nops, k = 0;
    g.ops = NULL;
    g.nops = g.cap = 0;
    for (int i = 0; i < nops; i++) {
        if (has(&ops[i], N4P_KT_COMM))
            ops[k++] = ops[i];
        else
            op_release(&ops[i]);
    }
    ncclResult_t rc = run_ops(ops, k);
    for (int i = 0; i < k; i++)
        op_release(&ops[i]);
    free(ops);
    return rc;
}
