/*
 * watchdog.c - the hang watchdog: one thread per process that looks at the
 * traced communicators (see trace.h) every WATCH_PERIOD.
 *
 * For a communicator with a timeout it
 *   - discovers the completion of GPU work: the event recorded after each
 *     call on its stream (hip/cudaEventQuery through src/gpu_runtime.c);
 *   - polls ncclCommGetAsyncError while work is in flight (GPU libraries);
 *   - finds the oldest call still in flight; when it has been in flight
 *     longer than the timeout (or an async error was reported), it writes
 *     the flight record, aborts the communicator (ncclCommAbort) and marks
 *     it aborted: the blocked call (or the next one) raises NcclTimeoutError.
 *
 * Aborting safely.  The handle must not be released while another thread
 * is about to use it.  The watchdog first tries to become the communicator's
 * "thread inside a call" (the owner word of communicator.c): then nobody is
 * inside and nobody can enter until it is done.  Otherwise a thread is
 * inside a call, and the watchdog aborts only when that call is the one
 * overdue and blocked in the library (the host backend confirms through
 * nccl4pyHostWaitState that it is waiting; NCCL and RCCL are built to be
 * aborted from another thread while a call is blocked); else it looks
 * again at the next period.
 *
 * SIGUSR1 (when NCCL4PY_TRACE_DIR is set and the signal has its default
 * action) makes the watchdog write every communicator's record.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "gpu_runtime.h"

#define WATCH_PERIOD_NS 100000000LL /* 100 ms */
#define WATCHDOG_OWNER ((unsigned long)-1)

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static n4p_trace *registry;
/* Threads may start communicators at once (free-threaded builds): the start
 * is serialized by start_mu (no Python code runs under it). */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static int started;
static sem_t wake;
static atomic_int dump_requested;

void
n4p_watchdog_register(n4p_trace *t)
{
    pthread_mutex_lock(&registry_mu);
    t->next = registry;
    registry = t;
    pthread_mutex_unlock(&registry_mu);
}

void
n4p_watchdog_unregister(n4p_trace *t)
{
    pthread_mutex_lock(&registry_mu);
    for (n4p_trace **p = &registry; *p != NULL; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    pthread_mutex_unlock(&registry_mu);
}

int
n4p_watchdog_dump_all(const char *reason)
{
    int n = 0;
    pthread_mutex_lock(&registry_mu);
    for (n4p_trace *t = registry; t != NULL; t = t->next)
        if (n4p_trace_write_default(t, reason) == 0 && t->cap > 0 && t->rank >= 0)
            n++;
    pthread_mutex_unlock(&registry_mu);
    return n;
}

static int
in_flight(int s)
{
    return s == N4P_TS_RUNNING || s == N4P_TS_GROUPED || s == N4P_TS_ENQUEUED;
}

/* GPU: mark the enqueued entries whose events have completed. */
static void
poll_events(n4p_trace *t, int64_t now)
{
    n4p_gpu_EVENT_QUERY_fn query = (n4p_gpu_EVENT_QUERY_fn)n4p_gpu_fn_quiet(NULL,
                                                                             N4P_GPU_EVENT_QUERY);
    if (query == NULL)
        return;
    uint64_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE), first = n > t->cap ? n - t->cap : 0;
    int64_t prev_end = 0;
    for (uint64_t i = first; i < n; i++) {
        n4p_trace_entry *e = &t->ring[i % t->cap];
        if (atomic_load_explicit(&e->state, memory_order_acquire) != N4P_TS_ENQUEUED) {
            int64_t end = atomic_load(&e->t_end);
            if (end > 0)
                prev_end = end;
            continue;
        }
        if (e->event == NULL || query(e->event) != N4P_GPU_SUCCESS)
            continue; /* not ready (or an error: the async error poll reports it) */
        if (prev_end > e->t_start)
            N4P_TSET(e->t_start, prev_end); /* it could not start before the one before it ended */
        atomic_store(&e->t_end, now);
        prev_end = now;
        int expected = N4P_TS_ENQUEUED;
        atomic_compare_exchange_strong(&e->state, &expected, N4P_TS_DONE);
    }
}

/* Host backend: whether the communicator's thread is waiting in the library,
 * and for whom (loader.c bound the function; NULL for another library). */
static int
host_waiting(ncclComm_t comm, char *who, size_t size)
{
    double waited;
    return n4p_host.wait_state != NULL && n4p_host.wait_state(comm, &waited, who, size) > 0;
}

static void
abort_comm(n4p_trace *t, n4p_trace_entry *e, int status, int64_t now)
{
    ncclComm_t h = atomic_load(&t->comm);
    unsigned long expected = 0;
    int claimed = atomic_compare_exchange_strong(t->owner, &expected, WATCHDOG_OWNER);
    char who[160] = "";
    if (!t->gpu) {
        int waiting = h != NULL && host_waiting(h, who, sizeof who);
        if (!claimed && !waiting)
            return; /* inside a call but not (yet) waiting in the library: look again */
    } else if (!claimed && atomic_load(&e->state) != N4P_TS_RUNNING) {
        return; /* another call is being made: look again */
    }
    pthread_mutex_lock(&t->mu);
    int go = !t->closed && !t->aborted && h != NULL;
    if (go) {
        t->aborted = 1;
        t->abort_status = status;
        t->abort_op = e->op;
        t->abort_seq = e->seq != 0 ? e->seq : (e->p2p ? t->p2p_seq : t->seq) + 1;
        t->abort_waited =
            (double)(n4p_trace_ticks_ns(now) - n4p_trace_ticks_ns(e->t_enqueue)) / 1e9;
        atomic_store_explicit(&t->aborted_flag, 1, memory_order_release);
        snprintf(t->waiting_for, sizeof t->waiting_for, "%s", who);
    }
    pthread_mutex_unlock(&t->mu);
    if (go) {
        (void)n4p_trace_write_default(t, status == ncclTimeout ? "timeout" : "async error");
        fprintf(stderr, "nccl4py watchdog: rank %d of %d: %s #%llu %s after %.1f s%s%s; "
                "aborting the communicator%s%s\n", t->rank, t->nranks, t->abort_op,
                (unsigned long long)t->abort_seq,
                status == ncclTimeout ? "has not completed" : "failed asynchronously",
                t->abort_waited, who[0] ? " waiting for ranks " : "", who,
                t->last_path[0] ? "; flight record: " : "", t->last_path);
        ncclCommAbort_fn fn = (ncclCommAbort_fn)n4p_fns[N4P_IDX_ncclCommAbort];
        if (fn != NULL)
            (void)fn(h);
        for (size_t i = 0; i < t->cap; i++) {
            int s = atomic_load(&t->ring[i].state);
            if ((s == N4P_TS_GROUPED || s == N4P_TS_ENQUEUED) &&
                atomic_compare_exchange_strong(&t->ring[i].state, &s, N4P_TS_ABORTED))
                atomic_store(&t->ring[i].t_end, n4p_trace_ticks());
        }
    }
    if (claimed)
        atomic_store(t->owner, 0);
}

void
n4p_watchdog_poll(n4p_trace *t, int64_t now)
{
    if (t->cap == 0)
        return;
    pthread_mutex_lock(&t->mu);
    int skip = t->closed || t->aborted || t->timeout_ns == 0;
    int64_t timeout = t->timeout_ns;
    pthread_mutex_unlock(&t->mu);
    if (skip)
        return;
    if (t->gpu)
        poll_events(t, now);
    n4p_trace_entry *oldest = NULL;
    uint64_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE), first = n > t->cap ? n - t->cap : 0;
    for (uint64_t i = first; i < n && oldest == NULL; i++) {
        n4p_trace_entry *e = &t->ring[i % t->cap];
        if (in_flight(atomic_load_explicit(&e->state, memory_order_acquire)))
            oldest = e;
    }
    if (oldest == NULL)
        return;
    ncclComm_t h = atomic_load(&t->comm);
    if (t->gpu && h != NULL) {
        ncclCommGetAsyncError_fn get = (ncclCommGetAsyncError_fn)n4p_fns[N4P_IDX_ncclCommGetAsyncError];
        ncclResult_t r = ncclSuccess;
        if (get != NULL && get(h, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
            abort_comm(t, oldest, (int)r, now);
            return;
        }
    }
    if (n4p_trace_ticks_ns(now) - n4p_trace_ticks_ns(oldest->t_enqueue) > timeout)
        abort_comm(t, oldest, ncclTimeout, now);
}

static int
any_timeout(void)
{
    int any = 0;
    for (n4p_trace *t = registry; t != NULL && !any; t = t->next) {
        pthread_mutex_lock(&t->mu); /* n4p_trace_setup writes it under t->mu */
        any = t->timeout_ns > 0;
        pthread_mutex_unlock(&t->mu);
    }
    return any;
}

static void *
watch(void *Py_UNUSED(arg))
{
    for (;;) {
        pthread_mutex_lock(&registry_mu);
        int fast = any_timeout();
        pthread_mutex_unlock(&registry_mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = (long long)ts.tv_nsec + (fast ? WATCH_PERIOD_NS : 1000000000LL);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        while (sem_timedwait(&wake, &ts) != 0 && errno == EINTR)
            ;
        if (atomic_exchange(&dump_requested, 0))
            (void)n4p_watchdog_dump_all("signal");
        int64_t now = n4p_trace_ticks();
        pthread_mutex_lock(&registry_mu);
        for (n4p_trace *t = registry; t != NULL; t = t->next)
            n4p_watchdog_poll(t, now);
        pthread_mutex_unlock(&registry_mu);
    }
    return NULL;
}

static void
on_sigusr1(int Py_UNUSED(sig))
{
    atomic_store(&dump_requested, 1);
    (void)sem_post(&wake); /* async-signal-safe */
}

static void
after_fork_child(void)
{
    started = 0; /* the thread is not in the child; its communicators are unusable there */
    pthread_mutex_init(&registry_mu, NULL);
    pthread_mutex_init(&start_mu, NULL);
}

static int start_locked(void);

/* Start the thread once; 0 or errno. */
int
n4p_watchdog_start(void)
{
    pthread_mutex_lock(&start_mu);
    int rc = started ? 0 : start_locked();
    pthread_mutex_unlock(&start_mu);
    return rc;
}

static int
start_locked(void)
{
    static int once;
    if (!once) {
        if (sem_init(&wake, 0, 0) != 0)
            return errno;
        (void)pthread_atfork(NULL, NULL, after_fork_child);
        once = 1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* no signal of the process's is handled on this thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    int rc = pthread_create(&th, &attr, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return rc;
    started = 1;
    if (n4p_tsettings.dir[0] != '\0') {
        struct sigaction cur;
        if (sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sigusr1;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_RESTART;
            (void)sigaction(SIGUSR1, &sa, NULL);
        }
    }
    return 0;
}
