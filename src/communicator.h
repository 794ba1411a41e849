/*
 * communicator.h - the C base of nccl.core.Communicator, shared by
 * communicator.c (the type and its calls, driven by collectives.def) and
 * comm_guard.c (the rules every call on a communicator obeys).
 */
#ifndef NCCL4PY_COMMUNICATOR_H
#define NCCL4PY_COMMUNICATOR_H

#include "bindings.h"
#include "trace.h"

#include <sys/types.h>

typedef struct {
    PyObject_HEAD
    ncclComm_t comm;           /* the handle the calls use: a copy of the slot's (below) */
    int nranks;   /* -1: not known yet */
    int rank;
    int dev_type; /* DLPack device type of the communicator's memory */
    int dev_id;
    pid_t pid;                 /* the process that made or adopted the handle */
    atomic_ulong owner;        /* thread ident inside a call on it, 0 when none */
    int owner_depth;           /* nesting of that thread's calls (owner only) */
    atomic_int pending;        /* calls queued in groups that have not ended */
    atomic_int active;         /* calls of groups now ending */
    ncclComm_t deferred_abort; /* aborted while calls were pending */
    n4p_trace *trace;          /* flight recorder and watchdog (trace.h) */
    n4p_slot handle;           /* the handle where the library writes it (slot.h) */
} commobj;

/* The handle is the slot's value, N4P_HANDLE(self): the library may write it
 * there, and after the object is gone (a non-blocking init, a group's end).
 * The calls read the copy in `comm` (one load less on every call), which is
 * the slot's value but for two moments, neither of which lets a call use a
 * stale one:
 *   - the library has yet to fill the slot: `comm` is NULL, so the call
 *     takes n4p_comm_check_valid, which copies the slot's value first;
 *   - the watchdog's abort nulled the slot (n4p_trace_end): until the next
 *     _trace_setup (which copies the slot's value) every call fails in
 *     n4p_comm_check_valid, which nulls `comm` too.
 * Everything else that sets the handle sets both (n4p_comm_set).  The
 * library only ever fills a null slot (nccl.core hands _comm_address only
 * to the creating call of a null communicator). */
#define N4P_HANDLE(self) (*(ncclComm_t *)N4P_FT_LOAD(&(self)->handle.at))
static inline void
n4p_comm_set(commobj *self, ncclComm_t h)
{
    N4P_FT_STORE(&self->comm, h);
    n4p_slot_set(&self->handle, h);
}

/* One library call of a collective or point-to-point method, as the library
 * receives it.  Every call of every method passes through one place with it
 * filled (run_call in communicator.c): the place to record calls. */
typedef struct {
    const char *method; /* "allreduce", ... */
    int fn;             /* API table index of the library function */
    const void *send;   /* NULL where the call (or this rank) has none */
    void *recv;
    const void *bias;
    size_t count;       /* the count the library gets (0 for alltoallv) */
    int dtype;
    int op;             /* -1 where the call has none */
    int root;           /* root or peer; -1 where the call has none (or None) */
    size_t *const *counts; /* alltoallv: sendcounts, sdispls, recvcounts, rdispls (else NULL) */
    ncclComm_t comm;
    cudaStream_t stream;
    PyObject *stream_obj; /* the stream argument (NULL when not given) */
    const void *config;   /* config=: an ncclCollConfig_t (NULL: the plain call) */
} n4p_call;

/* The roles of arguments, and the rules of buffers (collectives.def). */
enum {
    A_NONE,
#define N4P_ARG(ROLE, keyword, type, doc) ROLE,
#include "collectives.def"
    A_COUNT
};
enum {
#define N4P_RULE(RULE, doc) RULE,
#include "collectives.def"
};
extern const char *const n4p_coll_keywords[A_COUNT];

/* A call being made: its arguments, its resolved buffers (released, or kept
 * by the group, at its end) and the library call they make. */
enum { B_SEND, B_RECV, B_BIAS, NBUF };
#define N4P_MAXARGS 8
typedef struct {
    int rule;
    PyObject *args[N4P_MAXARGS]; /* in the method's order (borrowed; NULL: not given) */
    const signed char *at;       /* role -> its index in args (-1: none) */
    n4p_buffer buf[NBUF];
    unsigned resolved;      /* bit b: buf[b] is resolved */
    size_t *counts[4];      /* alltoallv's arrays (PyMem) */
    PyObject *config;       /* what config= made (the struct behind call.config), or NULL */
    ncclCollConfig_t config_copy; /* call.config in the loaded library's layout, when it differs */
    n4p_call call;
    n4p_trace_entry *te;    /* the call's flight record (NULL: recording off); the notes of
                               trace.h fill it */
} n4p_job;

/* call_checks.c: resolve the job's buffers and check them against its rule;
 * fill the call's buffers, count and dtype.  -1 with an exception. */
int n4p_check_buffers(PyObject *mod, commobj *self, n4p_job *j);

/* comm_guard.c: NcclInvalid(fmt, ...); returns NULL. */
PyObject *n4p_comm_invalid(PyObject *mod, const char *fmt, ...);
/* The process id, kept up to date in fork() children (n4p_comm_pid() sets
 * it up). */
extern pid_t n4p_current_pid;
pid_t n4p_comm_pid(void);
void n4p_comm_reset_cache(commobj *self);
/* Initialized, and of this process (not a fork() child); -1 with NcclInvalid. */
int n4p_comm_check_valid(PyObject *mod, commobj *self, const char *op);
/* NcclInvalid "in use by another thread (why)"; returns -1. */
int n4p_comm_busy(PyObject *mod, const char *op, const char *why);

/* Whether a call must go through n4p_comm_check_valid first. */
#define N4P_COMM_NEEDS_CHECK(self)                                                         \
    (N4P_FT_LOAD(&(self)->comm) == NULL || (self)->pid != n4p_current_pid ||               \
     (self)->trace != NULL)

/* Become the thread inside a call on self (-1 with NcclInvalid when another
 * thread is, or self is not usable here); a call from inside a call of the
 * same thread nests.  n4p_comm_leave ends it. */
static inline int
n4p_comm_enter(PyObject *mod, commobj *self, const char *op)
{
#if !N4P_FREE_THREADED
    if (N4P_COMM_NEEDS_CHECK(self) && n4p_comm_check_valid(mod, self, op) < 0)
        return -1;
#endif
    unsigned long me = PyThread_get_thread_ident();
    unsigned long expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&self->owner, &expected, me,
                                                 memory_order_acquire, memory_order_relaxed)) {
        if (expected != me)
            return n4p_comm_busy(mod, op, "a call on it has not returned");
#if N4P_FREE_THREADED
        if (N4P_COMM_NEEDS_CHECK(self) && n4p_comm_check_valid(mod, self, op) < 0)
            return -1;
#endif
        self->owner_depth++;
        return 0;
    }
    self->owner_depth = 1;
    if (atomic_load_explicit(&self->active, memory_order_relaxed) > 0) {
        atomic_store_explicit(&self->owner, 0, memory_order_release);
        return n4p_comm_busy(mod, op, "a group with calls on it is ending");
    }
#if N4P_FREE_THREADED
    /* With threads running at once the checks run once the owner word is
     * taken: destroy() takes it too, so no other thread can null the handle
     * (nor copy a stale one back from the slot) between the check and the
     * call. */
    if (N4P_COMM_NEEDS_CHECK(self) && n4p_comm_check_valid(mod, self, op) < 0) {
        self->owner_depth = 0;
        atomic_store_explicit(&self->owner, 0, memory_order_release);
        return -1;
    }
#endif
    return 0;
}

static inline void
n4p_comm_leave(commobj *self)
{
    if (--self->owner_depth == 0)
        atomic_store_explicit(&self->owner, 0, memory_order_release);
}
/* A call on self was queued in an open group: keep self, the stream object
 * and the buffers whose bit is set in `which` (with their exports) until the
 * outermost group end. */
void n4p_comm_keep_queued(commobj *self, PyObject *stream, n4p_buffer *bufs, unsigned which);
/* The guard's methods, for the type's method table. */
PyObject *n4p_comm_check(commobj *self, PyTypeObject *cls, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames);
PyObject *n4p_comm_acquire(commobj *self, PyTypeObject *cls, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames);
PyObject *n4p_comm_release(commobj *self, PyObject *unused);
PyObject *n4p_comm_take_handle(commobj *self, PyTypeObject *cls, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames);
PyObject *n4p_comm_queued(commobj *self, PyObject *const *args, Py_ssize_t nargs);
#define N4P_METH_METHOD (METH_METHOD | METH_FASTCALL | METH_KEYWORDS)
#define N4P_COMM_GUARD_METHODDEFS                                                          \
    {"_check", (PyCFunction)(void (*)(void))n4p_comm_check, N4P_METH_METHOD,              \
     "_check($self, operation, /)\n--\n\n"                                                \
     "NcclInvalid unless the communicator is initialized and of this process."},          \
    {"_acquire", (PyCFunction)(void (*)(void))n4p_comm_acquire, N4P_METH_METHOD,          \
     "_acquire($self, operation, exclusive=False, /)\n--\n\n"                             \
     "The handle, with this thread using the communicator until _release() (NcclInvalid " \
     "when another thread is in a call on it; exclusive: also while calls on it are "     \
     "queued in an open group)."},                                                        \
    {"_release", (PyCFunction)n4p_comm_release, METH_NOARGS,                              \
     "_release($self, /)\n--\n\nEnd what _acquire() began."},                              \
    {"_take_handle", (PyCFunction)(void (*)(void))n4p_comm_take_handle, N4P_METH_METHOD,  \
     "_take_handle($self, abort, /)\n--\n\n"                                              \
     "The handle for ncclCommDestroy (abort: ncclCommAbort), or 0 when the library has "  \
     "nothing to do; the communicator is null afterwards."},                              \
    {"_queued", (PyCFunction)(void (*)(void))n4p_comm_queued, METH_FASTCALL,              \
     "_queued($self, /, *objs)\n--\n\n"                                                   \
     "Inside a group, keep objs alive and count a queued call (True); outside, False."}

#endif /* NCCL4PY_COMMUNICATOR_H */
