/*
 * trace.c - the flight recorder: per-communicator ring of calls, the hooks
 * communicator.c calls, the settings, and the JSON record (see trace.h).
 *
 * Threads.  Only the thread inside a call on a communicator writes its ring
 * (communicator.c lets one thread at a time in); the watchdog thread reads
 * it, and writes only `state`, `t_start` and `t_end` of entries whose GPU
 * completion it discovers.  `state` is published last (release), so a
 * reader that sees a state sees the fields written before it; a record
 * written while a slot is being reused may show that one entry half-old.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gen/dtype_table.h"
#include "gen/enum_names.h"
#include "gpu_runtime.h"

n4p_trace_settings n4p_tsettings;
/* Threads: the settings are read once, under settings_mu (a PyMutex on a
 * free-threaded build: it is held while exceptions are made), and published
 * by settings_loaded (release order); they never change afterwards. */
static int settings_loaded;
static n4p_mutex settings_mu;
static atomic_int next_index; /* communicators traced by this process so far */
_Thread_local n4p_trace_entry *n4p_trace_cur;

#define MAX_BUFFER 10000000L
#define MAX_TIMEOUT (365.0 * 86400.0)

int64_t
n4p_trace_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Ticks to CLOCK_REALTIME: a first rate measured over 2 ms when the settings
 * are read, then the rate over the whole time since (more exact as it grows). */
static int64_t tick0, real0;
static double rate0 = 1.0; /* nanoseconds per tick */

static void
calibrate(void)
{
    tick0 = n4p_trace_ticks();
    real0 = n4p_trace_now();
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    int64_t t1 = n4p_trace_ticks(), r1 = n4p_trace_now();
    if (t1 > tick0)
        rate0 = (double)(r1 - real0) / (double)(t1 - tick0);
}

int64_t
n4p_trace_ticks_ns(int64_t ticks)
{
    int64_t t = n4p_trace_ticks(), r = n4p_trace_now();
    double rate = r - real0 > 1000000000 && t > tick0 ? (double)(r - real0) / (double)(t - tick0)
                                                       : rate0;
    return real0 + (int64_t)((double)(ticks - tick0) * rate);
}

/* ---------------------------------------------------------- settings */

static int
bad_env(const char *name, const char *text, const char *range)
{
    PyErr_Format(PyExc_ValueError, "%s=%.100s is invalid: expected %s", name, text, range);
    return -1;
}

static int
env_long(const char *name, long lo, long hi, long dflt, const char *range, long *out)
{
    const char *s = getenv(name);
    *out = dflt;
    if (s == NULL || *s == '\0')
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (*end == ' ')
        end++;
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return bad_env(name, s, range);
    *out = v;
    return 0;
}

static int
env_seconds(const char *name, double *out)
{
    const char *s = getenv(name);
    *out = 0;
    if (s == NULL || *s == '\0')
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end == ' ')
        end++;
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > MAX_TIMEOUT)
        return bad_env(name, s, "seconds, a number from 0 (off) to 31536000");
    *out = v;
    return 0;
}

/* NCCL4PY_TRACE_DIR: a directory (created, mode 0755, when missing) in which
 * no other user can replace or remove this process's records: owned by this
 * user or root, and writable by nobody else unless it has the sticky bit
 * (as /tmp).  0, or -1 with ValueError. */
static int
check_trace_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 && (errno != ENOENT || (mkdir(dir, 0755) != 0 && errno != EEXIST) ||
                                stat(dir, &st) != 0))
        return bad_env("NCCL4PY_TRACE_DIR", dir, "a directory (or a path where one can be "
                       "created)");
    if (!S_ISDIR(st.st_mode))
        return bad_env("NCCL4PY_TRACE_DIR", dir, "a directory (or a path where one can be "
                       "created)");
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        PyErr_Format(PyExc_ValueError, "NCCL4PY_TRACE_DIR=%.100s is refused: it belongs to "
                     "another user (uid %d), who could replace the flight records in it; use "
                     "a directory of your own", dir, (int)st.st_uid);
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
        char mode[16]; /* PyErr_Format has no %o */
        snprintf(mode, sizeof mode, "%04o", (unsigned)(st.st_mode & 07777));
        PyErr_Format(PyExc_ValueError, "NCCL4PY_TRACE_DIR=%.100s is refused: other users can "
                     "write to it (mode %s) and it has no sticky bit, so they could replace "
                     "the flight records in it; make it private (chmod go-w) or sticky "
                     "(chmod +t)", dir, mode);
        return -1;
    }
    return 0;
}

static int settings_load_locked(void);

int
n4p_trace_settings_load(PyObject *Py_UNUSED(mod))
{
    if (N4P_FT_LOAD(&settings_loaded))
        return 0;
    n4p_lock(&settings_mu);
    int r = settings_loaded ? 0 : settings_load_locked();
    n4p_unlock(&settings_mu);
    return r;
}

static int
settings_load_locked(void)
{
    n4p_trace_settings s = {0};
    long log = 0;
    if (env_long("NCCL4PY_TRACE_BUFFER", 0, MAX_BUFFER, 2000,
                 "an integer from 0 (off) to 10000000 (entries per communicator)", &s.buffer) < 0 ||
        env_seconds("NCCL4PY_WATCHDOG_TIMEOUT", &s.timeout) < 0 ||
        env_long("NCCL4PY_TRACE", 0, 1, 0, "0 or 1", &log) < 0)
        return -1;
    s.log = (int)log;
    const char *dir = getenv("NCCL4PY_TRACE_DIR");
    if (dir != NULL && *dir != '\0') {
        if (strlen(dir) >= sizeof s.dir)
            return bad_env("NCCL4PY_TRACE_DIR", dir, "a directory path shorter than 400 bytes");
        if (check_trace_dir(dir) < 0)
            return -1;
        strcpy(s.dir, dir);
    }
    s.log_file = stderr;
    const char *file = getenv("NCCL4PY_TRACE_FILE");
    if (file != NULL && *file != '\0') {
        FILE *f = fopen(file, "a");
        if (f == NULL)
            return bad_env("NCCL4PY_TRACE_FILE", file, "a file that can be opened for appending");
        setvbuf(f, NULL, _IOLBF, 0);
        s.log_file = f;
    }
    n4p_tsettings = s;
    N4P_FT_STORE(&settings_loaded, 1);
    Py_BEGIN_ALLOW_THREADS
    calibrate();
    Py_END_ALLOW_THREADS
    if ((s.dir[0] != '\0' || s.timeout > 0) && n4p_watchdog_start() != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot start the nccl4py watchdog thread");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- life */

static n4p_trace *
trace_new(ncclComm_t comm, atomic_ulong *owner)
{
    n4p_trace *t = PyMem_RawCalloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->cap = (size_t)n4p_tsettings.buffer;
    if (t->cap > 0 && (t->ring = PyMem_RawCalloc(t->cap, sizeof *t->ring)) == NULL) {
        PyMem_RawFree(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    atomic_store(&t->comm, comm);
    t->owner = owner;
    t->index = atomic_fetch_add_explicit(&next_index, 1, memory_order_relaxed);
    t->gpu = n4p_library_kind != N4P_LIB_HOST;
    t->timeout_ns = (int64_t)(n4p_tsettings.timeout * 1e9);
    N4P_TSET(t->rank, -1);
    N4P_TSET(t->nranks, -1);
    n4p_watchdog_register(t);
    return t;
}

static int
ensure_trace(PyObject *mod, n4p_trace **slot, ncclComm_t comm, atomic_ulong *owner)
{
    if (*slot != NULL)
        return 0;
    if (n4p_trace_settings_load(mod) < 0)
        return -1;
    /* the library decides how completion is tracked */
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire) && n4p_load(mod) < 0)
        return -1;
    if ((*slot = trace_new(comm, owner)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if ((*slot)->gpu && (*slot)->timeout_ns > 0)
        (void)n4p_gpu_fn_quiet(mod, N4P_GPU_EVENT_RECORD);
    return 0;
}

void
n4p_trace_free(n4p_trace *t)
{
    if (t == NULL)
        return;
    n4p_watchdog_unregister(t);
    n4p_gpu_EVENT_DESTROY_fn destroy = t->gpu ? (n4p_gpu_EVENT_DESTROY_fn)n4p_gpu_fn_quiet(
                                                    NULL, N4P_GPU_EVENT_DESTROY)
                                              : NULL;
    for (size_t i = 0; i < t->cap; i++)
        if (t->ring[i].event != NULL && destroy != NULL)
            (void)destroy(t->ring[i].event);
    pthread_mutex_destroy(&t->mu);
    PyMem_RawFree(t->ring);
    PyMem_RawFree(t);
}

/* -------------------------------------------------------------- hooks */

int
n4p_trace_begin(PyObject *mod, n4p_trace **slot, atomic_ulong *owner, ncclComm_t comm, int rank,
                int nranks, const char *op, int p2p, n4p_trace_entry **out)
{
    *out = NULL;
    n4p_trace *t = *slot;
    if (t == NULL && ensure_trace(mod, slot, comm, owner) < 0)
        return -1;
    t = *slot;
    if (t->cap == 0)
        return 0;
    atomic_store_explicit(&t->comm, comm, memory_order_relaxed);
    N4P_TSET(t->rank, rank);
    N4P_TSET(t->nranks, nranks);
    uint64_t at = t->n; /* written by the calling thread only; the watchdog reads it */
    __atomic_store_n(&t->n, at + 1, __ATOMIC_RELEASE);
    n4p_trace_entry *e = &t->ring[at % t->cap];
    _Atomic uint64_t *counter = p2p ? &t->p2p_seq : &t->seq;
    uint64_t seq = N4P_TGET(*counter) + 1;
    N4P_TSET(*counter, seq);
    N4P_TSET(e->op, op);
    N4P_TSET(e->p2p, p2p != 0);
    N4P_TSET(e->seq, seq);
    N4P_TSET(e->status, -1); /* not in the library (yet) */
    N4P_TSET(e->dtype, -1);
    N4P_TSET(e->redop, -1);
    N4P_TSET(e->root, -1);
    N4P_TSET(e->peer, -1);
    N4P_TSET(e->count, (size_t)-1);
    N4P_TSET(e->recvcount, (size_t)-1);
    N4P_TSET(e->sendbuf, NULL);
    N4P_TSET(e->recvbuf, NULL);
    N4P_TSET(e->stream, NULL);
    N4P_TSET(e->group_depth, n4p_group_depth());
    int64_t now = n4p_trace_ticks();
    N4P_TSET(e->t_enqueue, now);
    N4P_TSET(e->t_start, now);
    atomic_store_explicit(&e->t_end, 0, memory_order_relaxed);
    atomic_store_explicit(&e->state, N4P_TS_RUNNING, memory_order_release);
    n4p_trace_cur = e;
    *out = e;
    return 0;
}

static const char *const redop_names[] = {N4P_NAMES_ncclRedOp_t};

static const char *
name_of(const char *const *names, size_t n, int v, char *buf, size_t size)
{
    if (v >= 0 && (size_t)v < n)
        return names[v];
    snprintf(buf, size, "%d", v);
    return buf;
}
#define NAME(tbl, v, buf) name_of(tbl, sizeof tbl / sizeof tbl[0], v, buf, sizeof buf)

/* A data type by the one table's name (gen/dtype_table.h), else its number. */
static const char *
dtype_text(int v, char *buf, size_t size)
{
    const n4p_dtype_row *r = n4p_dtype_row_of(v);
    if (r != NULL)
        return r->array_name;
    snprintf(buf, size, "%d", v);
    return buf;
}

static void
log_line(const n4p_trace *t, const n4p_trace_entry *e)
{
    char d[16], o[16], extra[64] = "";
    if (e->root >= 0)
        snprintf(extra, sizeof extra, " root=%d", e->root);
    else if (e->peer >= 0)
        snprintf(extra, sizeof extra, " peer=%d", e->peer);
    int64_t end = atomic_load(&e->t_end);
    fprintf(n4p_tsettings.log_file,
            "nccl4py trace: rank %d/%d %s#%llu %s count=%lld %s%s%s%s %.3f ms %s%s\n", t->rank,
            t->nranks, e->p2p ? "p2p" : "", (unsigned long long)e->seq, e->op,
            e->count == (size_t)-1 ? -1LL : (long long)e->count, dtype_text(e->dtype, d, sizeof d),
            e->redop >= 0 ? " " : "", e->redop >= 0 ? NAME(redop_names, e->redop, o) : "", extra,
            end > 0 ? (double)(n4p_trace_ticks_ns(end) - n4p_trace_ticks_ns(e->t_enqueue)) / 1e6
                    : 0.0,
            e->status != 0 ? "failed" : e->group_depth > 0 ? "queued in group" : "ok",
            t->gpu && e->status == 0 && e->group_depth == 0 ? " (enqueued)" : "");
}

/* GPU: record e's completion event on its stream (the GIL is held). */
static int
record_event(n4p_trace_entry *e)
{
    n4p_gpu_EVENT_RECORD_fn rec =
        (n4p_gpu_EVENT_RECORD_fn)n4p_gpu_fn_quiet(NULL, N4P_GPU_EVENT_RECORD);
    if (rec == NULL)
        return -1;
    if (e->event == NULL) {
        n4p_gpu_EVENT_CREATE_WITH_FLAGS_fn create =
            (n4p_gpu_EVENT_CREATE_WITH_FLAGS_fn)n4p_gpu_fn_quiet(NULL,
                                                                 N4P_GPU_EVENT_CREATE_WITH_FLAGS);
        int rc = -1;
        void *event = NULL;
        if (create != NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = create(&event, N4P_GPU_EVENT_DISABLE_TIMING);
            Py_END_ALLOW_THREADS
        }
        if (rc != N4P_GPU_SUCCESS)
            return -1;
        N4P_TSET(e->event, event);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = rec(e->event, e->stream);
    Py_END_ALLOW_THREADS
    return rc == N4P_GPU_SUCCESS ? 0 : -1;
}

/* The state of a call that returned successfully, outside a group. */
static void
completed(n4p_trace *t, n4p_trace_entry *e, int64_t now)
{
    if (!t->gpu) {
        atomic_store(&e->t_end, now);
        atomic_store_explicit(&e->state, N4P_TS_DONE, memory_order_release);
    } else if (t->timeout_ns > 0 && record_event(e) == 0) {
        atomic_store_explicit(&e->state, N4P_TS_ENQUEUED, memory_order_release);
    } else {
        atomic_store(&e->t_end, now);
        atomic_store_explicit(&e->state, N4P_TS_ISSUED, memory_order_release);
    }
}

/* Raise NcclTimeoutError for t (aborted by the watchdog); NULL.
 *
 * Python is called with no exception pending and without t->mu: what the
 * exception says is copied under the lock first, because another thread
 * takes the lock with the GIL held (abort(), _trace_setup) and making the
 * exception runs Python code, which may let that thread run.  The class
 * comes from the module state, fetched at import.  The NCCLError of a call
 * the abort interrupted becomes the exception's __context__; any other
 * pending exception (a signal handler's KeyboardInterrupt, say) propagates as
 * it is, and the next use of the communicator raises NcclTimeoutError. */
static PyObject *
raise_aborted(PyObject *mod, n4p_trace *t, const char *when)
{
    n4p_state *st = n4p_get_state(mod);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type != NULL && !PyErr_GivenExceptionMatches(type, st->nccl_error)) {
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    char msg[1024];
    pthread_mutex_lock(&t->mu);
    int status = t->abort_status;
    const char *op = t->abort_op != NULL ? t->abort_op : "a call";
    unsigned long long seq = (unsigned long long)t->abort_seq;
    double waited = t->abort_waited;
    if (status == ncclTimeout)
        snprintf(msg, sizeof msg,
                 "%s #%llu did not complete within the watchdog timeout of %.3g s (waited %.1f "
                 "s%s%s); the watchdog aborted the communicator%s%s%s",
                 op, seq, (double)t->timeout_ns / 1e9, waited,
                 t->waiting_for[0] ? "; it waited for ranks " : "", t->waiting_for, when,
                 t->last_path[0] ? "; flight record: " : "", t->last_path);
    else
        snprintf(msg, sizeof msg,
                 "the library reported an asynchronous error (status %d) while %s #%llu was in "
                 "flight; the watchdog aborted the communicator%s%s%s",
                 status, op, seq, when, t->last_path[0] ? "; flight record: " : "",
                 t->last_path);
    pthread_mutex_unlock(&t->mu);
    if (type != NULL)
        PyErr_NormalizeException(&type, &value, &tb);
    PyObject *exc = PyObject_CallFunction(st->timeout_error, "issKd", status, msg, op, seq,
                                          waited);
    PyObject *et = NULL, *ev = NULL, *etb = NULL;
    if (exc == NULL) /* set aside while the references below go (a __del__ may run) */
        PyErr_Fetch(&et, &ev, &etb);
    else if (value != NULL) {
        if (tb != NULL)
            (void)PyException_SetTraceback(value, tb);
        PyException_SetContext(exc, value); /* steals value */
        value = NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (exc != NULL) /* Restore, not SetObject: that would replace the context */
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, NULL);
    else
        PyErr_Restore(et, ev, etb);
    return NULL;
}

PyObject *
n4p_trace_end(PyObject *mod, n4p_trace *t, n4p_trace_entry *e, n4p_trace_entry *outer,
              PyObject *res, ncclComm_t *comm)
{
    if (e == NULL)
        return res;
    n4p_trace_cur = outer;
    int64_t now = n4p_trace_ticks();
    if (e->status < 0) { /* refused before the library: not a call */
        atomic_store_explicit(&e->state, N4P_TS_FREE, memory_order_release);
        if (&t->ring[(t->n - 1) % t->cap] == e) { /* the last one (no nested call since) */
            __atomic_store_n(&t->n, t->n - 1, __ATOMIC_RELEASE);
            _Atomic uint64_t *counter = N4P_TGET(e->p2p) ? &t->p2p_seq : &t->seq;
            N4P_TSET(*counter, N4P_TGET(*counter) - 1);
        }
    } else {
        if (e->status != ncclSuccess && e->status != ncclInProgress) {
            atomic_store(&e->t_end, now);
            atomic_store_explicit(&e->state, N4P_TS_FAILED, memory_order_release);
        } else if (e->group_depth > 0) {
            atomic_store_explicit(&e->state, N4P_TS_GROUPED, memory_order_release);
        } else {
            completed(t, e, now);
        }
        if (n4p_tsettings.log)
            log_line(t, e);
    }
    if (atomic_load_explicit(&t->aborted_flag, memory_order_acquire)) {
        if (atomic_load(&e->state) != N4P_TS_FREE) {
            atomic_store(&e->t_end, now);
            atomic_store(&e->state, N4P_TS_ABORTED);
        }
        *comm = NULL;
        Py_XDECREF(res);
        return raise_aborted(mod, t, "");
    }
    if (res == NULL && e->status > 0 && e->status != ncclInProgress && n4p_tsettings.dir[0]) {
        Py_BEGIN_ALLOW_THREADS /* the exception stays pending on this thread */
        (void)n4p_trace_write_default(t, "error");
        Py_END_ALLOW_THREADS
    }
    return res;
}

int
n4p_trace_check(PyObject *mod, n4p_trace *t, ncclComm_t *comm, const char *op)
{
    if (t == NULL || !atomic_load_explicit(&t->aborted_flag, memory_order_acquire))
        return 0;
    *comm = NULL;
    char when[160];
    snprintf(when, sizeof when, " (this call: %.100s)", op);
    raise_aborted(mod, t, when);
    return -1;
}

int
n4p_trace_take(n4p_trace *t)
{
    if (t == NULL)
        return 0;
    pthread_mutex_lock(&t->mu);
    int aborted = t->aborted;
    t->closed = 1;
    pthread_mutex_unlock(&t->mu);
    return aborted;
}

void
n4p_trace_group_ended(PyObject *Py_UNUSED(mod), n4p_trace *t)
{
    if (t == NULL || t->cap == 0)
        return;
    int64_t now = n4p_trace_ticks();
    /* the calls queued since the group began are the last GROUPED entries */
    for (uint64_t k = 0; k < t->n && k < t->cap; k++) {
        n4p_trace_entry *e = &t->ring[(t->n - 1 - k) % t->cap];
        int s = atomic_load(&e->state);
        if (s == N4P_TS_GROUPED)
            completed(t, e, now);
        else if (s != N4P_TS_FREE && e->group_depth == 0)
            break;
    }
}

/* ------------------------------------------------------------- records */

static const char *const state_names[] = {"free",   "running", "grouped", "enqueued",
                                          "issued", "done",    "failed",  "aborted"};

static void
write_entry(FILE *f, const n4p_trace_entry *e, int first)
{
    char d[16], o[16];
    int s = atomic_load_explicit(&e->state, memory_order_acquire);
    fprintf(f, "%s\n    {\"seq\": %llu, \"kind\": \"%s\", \"op\": \"%s\", \"count\": %lld, "
            "\"recvcount\": %lld, \"dtype\": \"%s\", \"redop\": ",
            first ? "" : ",", (unsigned long long)e->seq, e->p2p ? "p2p" : "coll", e->op,
            e->count == (size_t)-1 ? -1LL : (long long)e->count,
            e->recvcount == (size_t)-1 ? -1LL : (long long)e->recvcount,
            e->dtype < 0 ? "" : dtype_text(e->dtype, d, sizeof d));
    if (e->redop < 0)
        fputs("null", f);
    else
        fprintf(f, "\"%s\"", NAME(redop_names, e->redop, o));
    int64_t end = atomic_load(&e->t_end);
    fprintf(f, ", \"root\": %d, \"peer\": %d, \"sendbuf\": \"0x%" PRIxPTR "\", \"recvbuf\": "
            "\"0x%" PRIxPTR "\", \"stream\": \"0x%" PRIxPTR "\", \"group_depth\": %d, "
            "\"enqueue\": %.9f, \"start\": %.9f, \"end\": ",
            e->root, e->peer, (uintptr_t)e->sendbuf, (uintptr_t)e->recvbuf, (uintptr_t)e->stream,
            e->group_depth,
            (double)n4p_trace_ticks_ns(e->t_enqueue) / 1e9,
            (double)n4p_trace_ticks_ns(e->t_start) / 1e9);
    if (end > 0)
        fprintf(f, "%.9f", (double)n4p_trace_ticks_ns(end) / 1e9);
    else
        fputs("null", f);
    fprintf(f, ", \"state\": \"%s\", \"status\": %d}",
            s >= 0 && s <= N4P_TS_ABORTED ? state_names[s] : "unknown", e->status);
}

static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A new file beside path, named path.<pid>.<random>.tmp, opened with
 * O_CREAT|O_EXCL|O_NOFOLLOW: nothing that is already there (a file or a
 * symbolic link another user planted) is followed, truncated or reused.
 * The descriptor, or -1 with errno. */
static int
open_temp(const char *path, char *tmp, size_t size)
{
    static atomic_uint counter;
    for (int tries = 0; tries < 100; tries++) {
        unsigned int r;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (unsigned int)n4p_trace_now();
        r ^= atomic_fetch_add(&counter, 1u) * 2654435761u;
        if (snprintf(tmp, size, "%s.%d.%08x.tmp", path, (int)getpid(), r) >= (int)size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1; /* errno: EEXIST */
}

/* Write t's record to path: into a new temporary file (open_temp), renamed
 * over path, which replaces whatever path names (a symbolic link itself,
 * never its target).  0 or errno. */
int
n4p_trace_write(n4p_trace *t, const char *path, const char *reason)
{
    char tmp[600];
    int fd = open_temp(path, tmp, sizeof tmp);
    if (fd < 0)
        return errno;
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        int err = errno;
        (void)close(fd);
        (void)unlink(tmp);
        return err;
    }
    char host[256] = "";
    (void)gethostname(host, sizeof host - 1);
    pthread_mutex_lock(&t->mu);
    fprintf(f, "{\n  \"format\": \"nccl4py-trace-1\", \"reason\": ");
    json_str(f, reason);
    fprintf(f, ", \"rank\": %d, \"nranks\": %d, \"host\": ", t->rank, t->nranks);
    json_str(f, host);
    fprintf(f, ", \"pid\": %d, \"comm_hash\": ", (int)getpid());
    json_str(f, t->hash);
    fprintf(f, ", \"comm_index\": %d, \"backend\": \"%s\", \"time\": %.9f, \"timeout\": %.3f, "
            "\"buffer\": %zu, \"calls\": %llu, \"p2p_calls\": %llu,\n  \"aborted\": ",
            t->index, n4p_library_kind == N4P_LIB_HOST ? "host" :
            n4p_library_kind == N4P_LIB_RCCL ? "rccl" : "nccl",
            (double)n4p_trace_now() / 1e9, (double)t->timeout_ns / 1e9, t->cap,
            (unsigned long long)t->seq, (unsigned long long)t->p2p_seq);
    if (t->aborted) {
        fprintf(f, "{\"status\": %d, \"op\": ", t->abort_status);
        json_str(f, t->abort_op ? t->abort_op : "");
        fprintf(f, ", \"seq\": %llu, \"waited\": %.3f, \"waiting_for\": ",
                (unsigned long long)t->abort_seq, t->abort_waited);
        json_str(f, t->waiting_for);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    pthread_mutex_unlock(&t->mu);
    fputs(",\n  \"entries\": [", f);
    uint64_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE), first = n > t->cap ? n - t->cap : 0;
    int any = 0;
    for (uint64_t i = first; i < n; i++) {
        const n4p_trace_entry *e = &t->ring[i % t->cap];
        if (atomic_load(&e->state) == N4P_TS_FREE || e->seq == 0)
            continue;
        write_entry(f, e, !any);
        any = 1;
    }
    fputs("\n  ]\n}\n", f);
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0)
        (void)unlink(tmp);
    return err;
}

/* The record's place in NCCL4PY_TRACE_DIR: rank<R>.json for the process's
 * first communicator, rank<R>.comm<I>.json for later ones. */
int
n4p_trace_write_default(n4p_trace *t, const char *reason)
{
    if (n4p_tsettings.dir[0] == '\0' || t->cap == 0 || t->rank < 0)
        return 0;
    char path[512];
    if (t->index == 0)
        snprintf(path, sizeof path, "%s/rank%d.json", n4p_tsettings.dir, t->rank);
    else
        snprintf(path, sizeof path, "%s/rank%d.comm%d.json", n4p_tsettings.dir, t->rank,
                 t->index);
    int err = n4p_trace_write(t, path, reason);
    pthread_mutex_lock(&t->mu);
    if (err == 0)
        snprintf(t->last_path, sizeof t->last_path, "%s", path);
    pthread_mutex_unlock(&t->mu);
    if (err != 0)
        fprintf(stderr, "nccl4py: cannot write the flight record %s: %s\n", path, strerror(err));
    return err;
}

/* ------------------------------------------------------------ methods */

/* _trace_setup(timeout=None, comm_hash=None, rank=None, nranks=None): the watchdog timeout of this
 * communicator (seconds; None: NCCL4PY_WATCHDOG_TIMEOUT) and its hash. */
PyObject *
n4p_trace_setup(PyObject *mod, n4p_trace **slot, atomic_ulong *owner, ncclComm_t comm,
                PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const kw[] = {"timeout", "comm_hash", "rank", "nranks", NULL};
    PyObject *a[4];
    if (n4p_parse_args(args, nargs, kwnames, "_trace_setup", kw, 0, 4, a) < 0)
        return NULL;
    int rank = -1, nranks = -1; /* known before the communicator exists, when the caller says */
    if ((a[2] != NULL && a[2] != Py_None && n4p_arg_int(a[2], "rank", &rank) < 0) ||
        (a[3] != NULL && a[3] != Py_None && n4p_arg_int(a[3], "nranks", &nranks) < 0))
        return NULL;
    double timeout = -1;
    if (a[0] != NULL && a[0] != Py_None) {
        if (!PyLong_Check(a[0]) && !PyFloat_Check(a[0])) {
            PyErr_Format(PyExc_TypeError, "timeout must be a number of seconds or None, not "
                         "%.100s", Py_TYPE(a[0])->tp_name);
            return NULL;
        }
        timeout = PyFloat_AsDouble(a[0]);
        if (timeout == -1 && PyErr_Occurred())
            return NULL;
        if (!(timeout >= 0) || timeout > MAX_TIMEOUT) {
            PyErr_Format(PyExc_ValueError, "timeout must be from 0 (off) to 31536000 seconds, "
                         "got %R", a[0]);
            return NULL;
        }
    }
    const char *hash = NULL;
    if (a[1] != NULL && a[1] != Py_None && (hash = PyUnicode_AsUTF8(a[1])) == NULL)
        return NULL;
    if (ensure_trace(mod, slot, comm, owner) < 0)
        return NULL;
    n4p_trace *t = *slot;
    atomic_store(&t->comm, comm);
    if (rank >= 0 && nranks > 0) { /* a rank that hangs before its first call leaves a record */
        N4P_TSET(t->rank, rank);
        N4P_TSET(t->nranks, nranks);
    }
    if (timeout >= 0) {
        if (timeout > 0 && n4p_watchdog_start() != 0) {
            PyErr_SetString(PyExc_RuntimeError, "cannot start the nccl4py watchdog thread");
            return NULL;
        }
        pthread_mutex_lock(&t->mu);
        t->timeout_ns = (int64_t)(timeout * 1e9);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_lock(&t->mu);
    t->closed = t->aborted = 0; /* a new handle */
    atomic_store(&t->aborted_flag, 0);
    if (hash != NULL)
        snprintf(t->hash, sizeof t->hash, "%s", hash);
    int events = t->gpu && t->timeout_ns > 0;
    pthread_mutex_unlock(&t->mu);
    if (events) /* load the runtime now: the watchdog needs its events */
        (void)n4p_gpu_fn_quiet(mod, N4P_GPU_EVENT_RECORD);
    Py_RETURN_NONE;
}

/* dump_trace(path=None): write the record to path, or to NCCL4PY_TRACE_DIR. */
PyObject *
n4p_trace_dump(PyObject *Py_UNUSED(mod), n4p_trace *t, PyObject *path, const char *reason)
{
    if (t == NULL || t->cap == 0) {
        PyErr_SetString(PyExc_RuntimeError, "this communicator has no flight record: no call "
                        "was made on it, or NCCL4PY_TRACE_BUFFER=0");
        return NULL;
    }
    if (path == NULL || path == Py_None) {
        if (n4p_tsettings.dir[0] == '\0') {
            PyErr_SetString(PyExc_ValueError, "dump_trace() needs a path when "
                            "NCCL4PY_TRACE_DIR is not set");
            return NULL;
        }
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = n4p_trace_write_default(t, reason);
        Py_END_ALLOW_THREADS
        if (err != 0) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        return PyUnicode_FromString(t->last_path);
    }
    PyObject *bytes;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = n4p_trace_write(t, PyBytes_AS_STRING(bytes), reason);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(bytes);
        return NULL;
    }
    Py_DECREF(bytes);
    return Py_NewRef(path);
}

/* _trace_dump_all(reason): every traced communicator's record into
 * NCCL4PY_TRACE_DIR; the number written. */
PyObject *
n4p_trace_dump_all(PyObject *Py_UNUSED(mod), PyObject *reason)
{
    const char *r = PyUnicode_AsUTF8(reason);
    if (r == NULL)
        return NULL;
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = n4p_watchdog_dump_all(r);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(n);
}
