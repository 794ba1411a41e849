/*
 * trace.h - the flight recorder and the hang watchdog (src/trace.c,
 * src/watchdog.c).
 *
 * Every call of a nccl.core.Communicator collective or point-to-point method
 * is one entry in the communicator's ring buffer (n4p_trace): what was
 * called (operation, counts, dtype, reduction op, root or peer, buffer
 * addresses, stream, group depth), when (enqueue, start, end) and how it
 * ended.  The communicator's C methods feed it through a handful of hooks:
 *
 *   begin / end      around the method body (communicator.c: call_method)
 *   note_*           from the shared helpers that parse the arguments
 *                    (buffers, op, root/peer, stream) and the status
 *   check            where every use of the communicator is validated: a
 *                    communicator the watchdog aborted raises NcclTimeoutError
 *   take             where destroy()/abort() take the handle, so that the
 *                    watchdog and the user never both release it
 *   group_ended      when a group with calls on the communicator has ended
 *
 * Writing an entry costs two clock reads and a few stores on the caller's
 * thread (see bench/core_overhead.py).  A process-wide watchdog thread
 * (watchdog.c) looks at the communicators that have a timeout, polls the
 * GPU events and async errors of the GPU libraries, and on a timeout writes
 * the record, aborts the communicator and lets the blocked (or next) call
 * raise NcclTimeoutError.  Records are JSON files (trace.c: n4p_trace_write),
 * read by `python -m nccl.trace`.
 */
#ifndef NCCL4PY_TRACE_H
#define NCCL4PY_TRACE_H

#include "bindings.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* A relaxed store and load of an atomic field that one thread writes and
 * another (the watchdog) may read at the same time. */
#define N4P_TSET(lv, v) atomic_store_explicit(&(lv), (v), memory_order_relaxed)
#define N4P_TGET(lv) atomic_load_explicit(&(lv), memory_order_relaxed)

/* Entry states. */
enum {
    N4P_TS_FREE = 0,
    N4P_TS_RUNNING,   /* inside the library call */
    N4P_TS_GROUPED,   /* queued in a group that has not ended */
    N4P_TS_ENQUEUED,  /* returned; its GPU work is not known to be complete */
    N4P_TS_ISSUED,    /* returned; completion is not tracked (GPU, no watchdog) */
    N4P_TS_DONE,
    N4P_TS_FAILED,    /* the library returned an error */
    N4P_TS_ABORTED,   /* the communicator was aborted while it was in flight */
};

typedef struct {
    /* The calling thread fills an entry while the watchdog may be writing a
     * record of it: every field is atomic, written with relaxed stores
     * (N4P_TSET: a plain store on x86-64 and AArch64), so the record shows
     * each field as it was or as it is, never a torn value. */
    _Atomic int state;
    _Atomic int status;          /* ncclResult_t of the call (FAILED) */
    _Atomic uint64_t seq;        /* collective number (1, 2, ...) or p2p number */
    _Atomic(const char *) op;    /* static string: the method's name */
    _Atomic int p2p;             /* send/recv: numbered separately */
    _Atomic int dtype, redop, root, peer, group_depth;
    _Atomic size_t count, recvcount; /* elements of sendbuf and recvbuf (-1: none) */
    _Atomic(const void *) sendbuf, recvbuf;
    _Atomic(void *) stream;
    _Atomic int64_t t_enqueue, t_start; /* n4p_trace_ticks() */
    _Atomic int64_t t_end;      /* 0 while in flight */
    _Atomic(void *) event;      /* GPU: completion event (owned, reused) */
} n4p_trace_entry;

typedef struct n4p_trace n4p_trace;
struct n4p_trace {
    n4p_trace *next;            /* registry (watchdog.c) */
    n4p_trace_entry *ring;
    size_t cap;                 /* 0: recording off */
    uint64_t n;                 /* entries ever written (next slot: n % cap) */
    _Atomic uint64_t seq, p2p_seq; /* written by the calling thread (N4P_TSET) */
    _Atomic(ncclComm_t) comm;   /* the handle of the last call */
    atomic_ulong *owner;        /* communicator.c's "thread inside a call" word */
    _Atomic int rank, nranks;   /* written by the calling thread (N4P_TSET) */
    int index;
    int gpu;                    /* a GPU library: completion through events */
    int64_t timeout_ns;         /* 0: no watchdog */
    char hash[40];              /* communicator hash, from Python ("" unknown) */
    pthread_mutex_t mu;         /* guards the fields below */
    int closed;                 /* destroy()/abort() took the handle */
    int aborted;                /* the watchdog aborted it */
    atomic_int aborted_flag;    /* the same, read without the lock on the call path */
    int abort_status;           /* why: ncclTimeout, or the async error */
    uint64_t abort_seq;
    const char *abort_op;
    double abort_waited;        /* seconds */
    char waiting_for[160];      /* host backend: the ranks its wait was for */
    char last_path[512];        /* the record written last */
};

/* Process-wide settings, read from the environment once (trace.c). */
typedef struct {
    long buffer;            /* NCCL4PY_TRACE_BUFFER */
    double timeout;         /* NCCL4PY_WATCHDOG_TIMEOUT, seconds (0: off) */
    char dir[400];          /* NCCL4PY_TRACE_DIR ("" : none) */
    int log;                /* NCCL4PY_TRACE */
    FILE *log_file;         /* NCCL4PY_TRACE_FILE or stderr */
} n4p_trace_settings;

extern n4p_trace_settings n4p_tsettings;

/* The clock of the entries: the time-stamp counter where there is one (a
 * clock_gettime costs about twice as much, and every call reads the clock
 * twice), converted to CLOCK_REALTIME when a record is written. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline int64_t
n4p_trace_ticks(void)
{
    return (int64_t)__rdtsc();
}
#else
int64_t n4p_trace_now(void);
static inline int64_t
n4p_trace_ticks(void)
{
    return n4p_trace_now();
}
#endif
int n4p_trace_settings_load(PyObject *mod); /* 0, or -1 with ValueError */

/* The hooks (trace.c).  Each takes the communicator's trace (NULL: nothing
 * to do except create it, see begin). */
extern _Thread_local n4p_trace_entry *n4p_trace_cur;

/* 0 (*out: the entry, NULL when recording is off) or -1 with an exception.
 * p2p: a point-to-point call (numbered apart from the collectives). */
int n4p_trace_begin(PyObject *mod, n4p_trace **slot, atomic_ulong *owner, ncclComm_t comm,
                    int rank, int nranks, const char *op, int p2p, n4p_trace_entry **out);
PyObject *n4p_trace_end(PyObject *mod, n4p_trace *t, n4p_trace_entry *e, n4p_trace_entry *outer,
                        PyObject *res, ncclComm_t *comm);
int n4p_trace_check(PyObject *mod, n4p_trace *t, ncclComm_t *comm, const char *op);
int n4p_trace_take(n4p_trace *t);
void n4p_trace_group_ended(PyObject *mod, n4p_trace *t);
void n4p_trace_free(n4p_trace *t);

static inline void
n4p_trace_note_buffer(n4p_trace_entry *e, int writable, const void *ptr, size_t count, int dtype)
{
    if (e == NULL)
        return;
    if (writable) {
        N4P_TSET(e->recvbuf, ptr);
        N4P_TSET(e->recvcount, count);
    } else {
        N4P_TSET(e->sendbuf, ptr);
        N4P_TSET(e->count, count);
    }
    if (N4P_TGET(e->dtype) < 0)
        N4P_TSET(e->dtype, dtype);
}

/* The int fields of an entry that the argument parser notes. */
typedef enum { N4P_TF_REDOP, N4P_TF_ROOT, N4P_TF_PEER } n4p_trace_field;

static inline void
n4p_trace_note_int(n4p_trace_entry *e, n4p_trace_field field, int v)
{
    if (e == NULL)
        return;
    switch (field) {
    case N4P_TF_REDOP:
        N4P_TSET(e->redop, v);
        break;
    case N4P_TF_ROOT:
        N4P_TSET(e->root, v);
        break;
    case N4P_TF_PEER:
        N4P_TSET(e->peer, v);
        break;
    }
}

static inline void
n4p_trace_note_stream(n4p_trace_entry *e, void *stream)
{
    if (e != NULL)
        N4P_TSET(e->stream, stream);
}

/* The library call returned r. */
static inline void
n4p_trace_note_status(n4p_trace_entry *e, ncclResult_t r)
{
    if (e != NULL)
        N4P_TSET(e->status, (int)r);
}

/* Methods of _CommunicatorBase (trace.c). */
PyObject *n4p_trace_setup(PyObject *mod, n4p_trace **slot, atomic_ulong *owner, ncclComm_t comm,
                          PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *n4p_trace_dump(PyObject *mod, n4p_trace *t, PyObject *path, const char *reason);
PyObject *n4p_trace_dump_all(PyObject *mod, PyObject *reason);

/* Writing records (trace.c). */
int n4p_trace_write(n4p_trace *t, const char *path, const char *reason); /* 0 or errno */
int n4p_trace_write_default(n4p_trace *t, const char *reason);
int64_t n4p_trace_now(void);            /* CLOCK_REALTIME nanoseconds */
int64_t n4p_trace_ticks_ns(int64_t ticks); /* a tick count as CLOCK_REALTIME nanoseconds */

/* The watchdog (watchdog.c). */
void n4p_watchdog_register(n4p_trace *t);
void n4p_watchdog_unregister(n4p_trace *t);
int n4p_watchdog_start(void);           /* 0 or errno */
int n4p_watchdog_dump_all(const char *reason);
void n4p_watchdog_poll(n4p_trace *t, int64_t now); /* one check of one communicator */

/* GPU runtime entries for the watchdog (gpu_runtime.c): the function of
 * table entry idx, loading the runtime; NULL (exception cleared) when it
 * cannot be loaded. */
void *n4p_gpu_fn_quiet(PyObject *mod, int idx);

#endif /* NCCL4PY_TRACE_H */
