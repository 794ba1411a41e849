/*
 * communicator.c - the C base of nccl.core.Communicator: the hot paths.
 *
 * `_CommunicatorBase` holds the ncclComm_t in a stable slot (so the 0.3-style
 * out-parameter convention can write it directly, see `_comm_address`) and
 * caches the communicator's size, rank and device.  Its collective and p2p
 * methods do everything in C without returning to Python: argument parsing,
 * buffer and stream resolution, validation with upstream nccl4py's messages,
 * the library call with the GIL released, and the release of the buffers
 * (inside a group they go to the group's keep list instead, see group.c).
 * Everything else of Communicator (life cycle, resources, properties) is in
 * nccl/core/communicator.py, a Python subclass.
 *
 * Rules checked at the entry of every call (enter()):
 *   threads  one call at a time per communicator: `owner` is the thread
 *            inside a call (an atomic compare-and-swap); another thread gets
 *            NcclInvalid "in use by another thread".  A call made from
 *            inside a call of the same thread (a producer's callback) nests.
 *   fork     the handle belongs to the process that made it (`pid`); in a
 *            fork() child every use is NcclInvalid, and destroy()/abort()
 *            only forget the handle (the library state is the parent's).
 *   groups   `pending` counts calls queued in groups not yet ending,
 *            `active` those of a group now ending; destroy() and finalize()
 *            refuse while either is positive, abort() waits for the
 *            pending ones' group end (`deferred_abort`).
 */
#include "bindings.h"
#include "trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    ncclComm_t comm;
    int nranks;   /* -1: not known yet */
    int rank;
    int dev_type; /* DLPack device type of the communicator's memory */
    int dev_id;
    pid_t pid;                /* the process that made or adopted the handle */
    atomic_ulong owner;       /* thread ident inside a call on it, 0 when none */
    int owner_depth;          /* nesting of that thread's calls (owner only) */
    atomic_int pending;       /* calls queued in groups that have not ended */
    atomic_int active;        /* calls of groups now ending */
    ncclComm_t deferred_abort; /* aborted while calls were pending */
    n4p_trace *trace;          /* flight recorder and watchdog (trace.h) */
} commobj;

/* The current process id, kept up to date in fork() children. */
static pid_t current_pid;

static void
after_fork_child(void)
{
    current_pid = getpid();
}

static void
init_pid(void)
{
    current_pid = getpid();
    (void)pthread_atfork(NULL, NULL, after_fork_child);
}

static const char *const dtype_names[] = {
    "Int8", "Uint8", "Int32", "Uint32", "Int64", "Uint64", "Float16", "Float32", "Float64",
    "Bfloat16", "Float8e4m3", "Float8e5m2"};

static const char *
dtype_name(int dt)
{
    return dt >= 0 && dt < (int)(sizeof dtype_names / sizeof dtype_names[0]) ? dtype_names[dt]
                                                                              : "unknown";
}

static PyObject *
invalid(PyObject *mod, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg != NULL) {
        PyErr_SetObject(n4p_get_state(mod)->nccl_invalid, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

static void
reset_cache(commobj *self)
{
    self->nranks = -1;
    self->rank = -1;
    self->dev_type = -1;
    self->dev_id = -1;
}

/* Initialized and usable in this process. */
static int
check_valid(PyObject *mod, commobj *self, const char *op)
{
    if (n4p_trace_check(mod, self->trace, &self->comm, op) < 0)
        return -1;
    if (self->comm == NULL) {
        invalid(mod, "Cannot %s: Communicator not initialized", op);
        return -1;
    }
    if (self->pid != current_pid) {
        invalid(mod, "Cannot %s: this communicator belongs to process %d, and this is its "
                "fork() child %d; a child cannot take part in the parent's communicators "
                "(create a new one in the child)", op, (int)self->pid, (int)current_pid);
        return -1;
    }
    return 0;
}

static int
busy(PyObject *mod, const char *op, const char *why)
{
    invalid(mod, "Cannot %s: the communicator is in use by another thread (%s); calls on one "
            "communicator must not overlap: give each thread its own communicator, or "
            "serialize the calls with a lock", op, why);
    return -1;
}

/* Become the thread inside a call on self; -1 with NcclInvalid when another
 * thread is. */
static int
enter(PyObject *mod, commobj *self, const char *op)
{
    if (check_valid(mod, self, op) < 0)
        return -1;
    unsigned long me = PyThread_get_thread_ident();
    unsigned long expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&self->owner, &expected, me,
                                                 memory_order_acquire, memory_order_relaxed)) {
        if (expected != me)
            return busy(mod, op, "a call on it has not returned");
        self->owner_depth++;
        return 0;
    }
    self->owner_depth = 1;
    if (atomic_load_explicit(&self->active, memory_order_relaxed) > 0) {
        atomic_store_explicit(&self->owner, 0, memory_order_release);
        return busy(mod, op, "a group with calls on it is ending");
    }
    return 0;
}

static void
leave(commobj *self)
{
    if (--self->owner_depth == 0)
        atomic_store_explicit(&self->owner, 0, memory_order_release);
}

/* ----------------------------------------------------- grouped calls */

static void
abort_now(ncclComm_t comm)
{
    ncclCommAbort_fn fn = (ncclCommAbort_fn)n4p_fns[N4P_IDX_ncclCommAbort];
    if (fn != NULL && comm != NULL) {
        ncclResult_t r;
        CALL(fn(comm));
        (void)r; /* nothing to report it to: the communicator is already invalid */
    }
}

static void
comm_group_ending(PyObject *o)
{
    commobj *self = (commobj *)o;
    atomic_fetch_sub(&self->pending, 1);
    atomic_fetch_add(&self->active, 1);
}

static void
comm_group_ended(PyObject *o)
{
    commobj *self = (commobj *)o;
    atomic_fetch_sub(&self->active, 1);
    n4p_trace_group_ended(NULL, self->trace);
    if (self->deferred_abort != NULL && atomic_load(&self->pending) == 0 &&
        atomic_load(&self->active) == 0) {
        ncclComm_t c = self->deferred_abort;
        self->deferred_abort = NULL;
        abort_now(c);
    }
}

static const n4p_keep_hooks comm_hooks = {comm_group_ending, comm_group_ended};

/* A call on self was queued in an open group: keep self, the stream object
 * and the buffers (with their exports) until the outermost group end. */
static void
keep_queued(commobj *self, PyObject *stream, n4p_buffer *a, n4p_buffer *b, n4p_buffer *c)
{
    n4p_buffer *bufs[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (bufs[i] != NULL)
            n4p_group_keep_buffer(bufs[i]);
    if (stream != NULL && stream != Py_None && !PyLong_CheckExact(stream))
        n4p_group_keep(stream, NULL);
    atomic_fetch_add(&self->pending, 1);
    n4p_group_keep((PyObject *)self, &comm_hooks);
}

/* After every library call: outside a group (the common case) one
 * thread-local read. */
static inline void
queued(commobj *self, PyObject *stream, n4p_buffer *a, n4p_buffer *b, n4p_buffer *c)
{
    if (n4p_group_depth() > 0)
        keep_queued(self, stream, a, b, c);
}

/* ------------------------------------------------------------ overlap */

/* The send and receive extents a call uses may only overlap in its in-place
 * form, described by `form`: sendbuf starting *inplace bytes after recvbuf
 * (a negative offset: before; NULL: no in-place form here).  Any other
 * overlap would read memory the call has already written. */
static int
check_overlap(PyObject *mod, const char *sname, const void *sp, size_t sbytes, const char *rname,
              const void *rp, size_t rbytes, const intptr_t *inplace, const char *form)
{
    uintptr_t s = (uintptr_t)sp, r = (uintptr_t)rp;
    if (sbytes == 0 || rbytes == 0 || s >= r + rbytes || r >= s + sbytes)
        return 0;
    if (inplace != NULL && s == r + (uintptr_t)*inplace)
        return 0;
    invalid(mod, "%s and %s overlap (%s uses bytes [%p, %p), %s [%p, %p)) without being the "
            "in-place form of this call (%s): the result would be wrong; use separate buffers "
            "or the exact in-place form", sname, rname, sname, sp, (void *)(s + sbytes), rname,
            rp, (void *)(r + rbytes), form);
    return -1;
}

static const intptr_t same_address = 0;

/* The usual case: count elements of both, in place when they coincide. */
static int
same_or_disjoint(PyObject *mod, const n4p_buffer *s, const n4p_buffer *rb, size_t count)
{
    size_t bytes = count * n4p_dtype_size(s->dtype);
    return check_overlap(mod, "sendbuf", s->ptr, bytes, "recvbuf", rb->ptr, bytes, &same_address,
                         "sendbuf is recvbuf");
}

/* Fill nranks, rank and the device from the library, once. */
static int
ensure_info(PyObject *mod, commobj *self)
{
    if (self->nranks >= 0)
        return 0;
    ncclCommCount_fn count = (ncclCommCount_fn)n4p_fn(mod, N4P_IDX_ncclCommCount);
    ncclCommUserRank_fn user_rank = count ? (ncclCommUserRank_fn)n4p_fn(mod, N4P_IDX_ncclCommUserRank) : NULL;
    if (user_rank == NULL)
        return -1;
    int n = -1, r = -1, dev = 0;
    ncclResult_t rc;
    int host = n4p_library_kind == N4P_LIB_HOST;
    ncclCommCuDevice_fn cu = host ? NULL : (ncclCommCuDevice_fn)n4p_fns[N4P_IDX_ncclCommCuDevice];
    Py_BEGIN_ALLOW_THREADS
    rc = count(self->comm, &n);
    if (rc == ncclSuccess)
        rc = user_rank(self->comm, &r);
    if (rc == ncclSuccess && cu != NULL)
        rc = cu(self->comm, &dev);
    Py_END_ALLOW_THREADS
    if (n4p_status_failed(rc)) {
        n4p_raise_status(mod, rc);
        return -1;
    }
    self->nranks = n;
    self->rank = r;
    if (host) {
        self->dev_type = N4P_DEV_CPU;
        self->dev_id = 0;
    } else {
        self->dev_type = n4p_library_kind == N4P_LIB_RCCL ? N4P_DEV_ROCM : N4P_DEV_CUDA;
        self->dev_id = dev;
    }
    return 0;
}

static int
is_host_memory(int t)
{
    return t == N4P_DEV_CPU || t == N4P_DEV_CUDA_HOST || t == N4P_DEV_ROCM_HOST;
}

/* The buffer must live where the communicator works. */
static int
check_device(PyObject *mod, commobj *self, const n4p_buffer *b, const char *name)
{
    if (self->dev_type == N4P_DEV_CPU) {
        if (!is_host_memory(b->device_type) && b->device_type != N4P_DEV_CUDA_MANAGED) {
            invalid(mod, "%s is in GPU memory (DLPack device type %d, device %d), but this "
                    "communicator runs on the host backend, which works on host (CPU) memory",
                    name, b->device_type, b->device_id);
            return -1;
        }
        return 0;
    }
    if (b->device_type == N4P_DEV_CPU) {
        invalid(mod, "%s is a host (CPU) buffer, but communicator is on GPU device %d. "
                "Buffers must be in device memory on the communicator's device.",
                name, self->dev_id);
        return -1;
    }
    if (b->device_id >= 0 && !is_host_memory(b->device_type) && b->device_id != self->dev_id) {
        invalid(mod, "%s is on device %d, but communicator is on device %d. Buffers must be on "
                "the same device as the communicator.", name, b->device_id, self->dev_id);
        return -1;
    }
    return 0;
}

static int
resolve(PyObject *mod, commobj *self, PyObject *obj, const char *name, int writable,
        n4p_buffer *b)
{
    if (n4p_buffer_resolve(mod, obj, name, writable, b) < 0)
        return -1;
    if (check_device(mod, self, b, name) < 0) {
        n4p_buffer_release(b);
        return -1;
    }
    n4p_trace_note_buffer(writable, b->ptr, b->count, b->dtype);
    return 0;
}

/* A reduction op: NcclRedOp / int, or a CustomRedOp (its __index__).  Only
 * integers: a float such as 1.9 is a TypeError, never truncated. */
static int
get_op(PyObject *o, int *op)
{
    if (PyLong_Check(o) || (!PyFloat_Check(o) && PyIndex_Check(o))) {
        if (n4p_arg_int(o, "op", op) < 0)
            return -1;
        n4p_trace_note_int("op", *op);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "op must be an NcclRedOp, a CustomRedOp or an int, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static int
get_rank_arg(PyObject *mod, commobj *self, PyObject *o, const char *what, int *out)
{
    if (n4p_arg_int(o, what, out) < 0)
        return -1;
    if (*out < 0 || *out >= self->nranks) {
        invalid(mod, "%s %d is out of range for a communicator of %d ranks", what, *out,
                self->nranks);
        return -1;
    }
    n4p_trace_note_int(what, *out);
    return 0;
}

/* Parse (positional up to npos, then keyword-only) into out[0..maxargs). */
static int
parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fname,
      const char *const *kw, Py_ssize_t minargs, Py_ssize_t npos, Py_ssize_t maxargs,
      PyObject **out)
{
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)",
                     fname, npos, nargs);
        return -1;
    }
    return n4p_parse_args(args, nargs, kwnames, fname, kw, minargs, maxargs, out) < 0 ? -1 : 0;
}

static int
get_stream(PyObject *mod, PyObject *o, cudaStream_t *out)
{
    void *s = NULL;
    if (o != NULL && n4p_stream_resolve(mod, o, &s) < 0)
        return -1;
    *out = (cudaStream_t)s;
    n4p_trace_note_stream(s);
    return 0;
}

static PyObject *
finish(PyObject *mod, ncclResult_t r)
{
    n4p_trace_note_status(r);
    return n4p_status_none(mod, r);
}

#define METHOD_ARGS \
    commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames
#define BODY_ARGS \
    PyObject *mod, commobj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

/* c_name: the method; it runs b_name (the body) between enter() and leave(),
 * recorded by the flight recorder (trace.h). */
#define GUARDED(name)                                                                          \
    static PyObject *c_##name(METHOD_ARGS)                                                     \
    {                                                                                          \
        PyObject *mod = PyType_GetModule(cls);                                                 \
        if (mod == NULL || enter(mod, self, #name) < 0)                                        \
            return NULL;                                                                       \
        PyObject *res = NULL;                                                                  \
        n4p_trace_entry *outer = n4p_trace_cur, *te;                                           \
        if (ensure_info(mod, self) == 0 &&                                                     \
            n4p_trace_begin(mod, &self->trace, &self->owner, self->comm, self->rank,           \
                            self->nranks, #name, &te) == 0)                                    \
            res = n4p_trace_end(mod, self->trace, te, outer,                                   \
                                b_##name(mod, self, args, nargs, kwnames), &self->comm);       \
        leave(self);                                                                           \
        return res;                                                                            \
    }

static int
same_dtype(PyObject *mod, const n4p_buffer *s, const n4p_buffer *r)
{
    if (s->dtype != r->dtype) {
        invalid(mod, "Dtype mismatch: sendbuf has dtype %s, recvbuf has dtype %s",
                dtype_name(s->dtype), dtype_name(r->dtype));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ reductions */

/* reduce and gather: the root (-1 when rootobj is None: every rank receives),
 * sendbuf, and recvbuf where it is received, of sendbuf's dtype and at least
 * `factor` times its count (`why` explains that factor in the message), not
 * overlapping sendbuf except in place (the same memory for reduce; sendbuf
 * at rank * sendcount in recvbuf for gather).  On success the caller
 * releases both buffers (a buffer that was not resolved releases as a
 * no-op). */
static int
rooted_buffers(PyObject *mod, commobj *self, PyObject *sendobj, PyObject *recvobj,
               PyObject *rootobj, size_t factor, const char *why, int *root, n4p_buffer *s,
               n4p_buffer *rb)
{
    *root = -1;
    if (rootobj != NULL && rootobj != Py_None &&
        get_rank_arg(mod, self, rootobj, "root", root) < 0)
        return -1;
    if (resolve(mod, self, sendobj, "sendbuf", 0, s) < 0)
        return -1;
    if (*root >= 0 && *root != self->rank)
        return 0; /* recvbuf is not used on this rank */
    if (resolve(mod, self, recvobj, "recvbuf", 1, rb) < 0) {
        n4p_buffer_release(s);
        return -1;
    }
    size_t need = factor * s->count, es = n4p_dtype_size(s->dtype);
    if (same_dtype(mod, s, rb) == 0) {
        if (rb->count < need)
            invalid(mod, "Buffer count mismatch: recvbuf must have at least %zu elements%s, got "
                    "%zu", need, why, rb->count);
        else if (factor == 1) {
            if (same_or_disjoint(mod, s, rb, s->count) == 0)
                return 0;
        } else {
            intptr_t at = (intptr_t)((size_t)self->rank * s->count * es);
            if (check_overlap(mod, "sendbuf", s->ptr, s->count * es, "recvbuf", rb->ptr, need * es,
                              &at, "sendbuf is recvbuf + rank * sendcount") == 0)
                return 0;
        }
    }
    n4p_buffer_release(rb);
    n4p_buffer_release(s);
    return -1;
}

static PyObject *
reduce_impl(PyObject *mod, commobj *self, PyObject *sendobj, PyObject *recvobj, PyObject *opobj,
            PyObject *rootobj, PyObject *streamobj)
{
    int op, root;
    cudaStream_t stream;
    if (get_op(opobj, &op) < 0 || get_stream(mod, streamobj, &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0};
    if (rooted_buffers(mod, self, sendobj, recvobj, rootobj, 1, "", &root, &s, &rb) < 0)
        return NULL;
    PyObject *res = NULL;
    ncclResult_t r;
    if (root < 0) {
        ncclAllReduce_fn fn = (ncclAllReduce_fn)n4p_fn(mod, N4P_IDX_ncclAllReduce);
        if (fn == NULL)
            goto out;
        CALL(fn(s.ptr, rb.ptr, s.count, (ncclDataType_t)s.dtype, (ncclRedOp_t)op, self->comm, stream));
    } else {
        ncclReduce_fn fn = (ncclReduce_fn)n4p_fn(mod, N4P_IDX_ncclReduce);
        if (fn == NULL)
            goto out;
        CALL(fn(s.ptr, rb.ptr, s.count, (ncclDataType_t)s.dtype, (ncclRedOp_t)op, root,
                self->comm, stream));
    }
    queued(self, streamobj, &s, &rb, NULL);
    res = finish(mod, r);
out:
    n4p_buffer_release(&rb);
    n4p_buffer_release(&s);
    return res;
}

static PyObject *
b_allreduce(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "op", "stream", NULL};
    PyObject *a[4];
    if (parse(args, nargs, kwnames, "allreduce", kw, 3, 4, 4, a) < 0)
        return NULL;
    return reduce_impl(mod, self, a[0], a[1], a[2], NULL, a[3]);
}
GUARDED(allreduce)

static PyObject *
b_reduce(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "op", "root", "stream", NULL};
    PyObject *a[5];
    if (parse(args, nargs, kwnames, "reduce", kw, 3, 4, 5, a) < 0)
        return NULL;
    return reduce_impl(mod, self, a[0], a[1], a[2], a[3], a[4]);
}
GUARDED(reduce)

/* reduce_scatter and alltoall: both buffers, same dtype, and at least one
 * element of sendbuf per rank; *per is sendbuf's count / nranks. */
static int
per_rank_buffers(PyObject *mod, commobj *self, PyObject *sendobj, PyObject *recvobj,
                 n4p_buffer *s, n4p_buffer *rb, size_t *per)
{
    if (resolve(mod, self, sendobj, "sendbuf", 0, s) < 0)
        return -1;
    if (resolve(mod, self, recvobj, "recvbuf", 1, rb) < 0) {
        n4p_buffer_release(s);
        return -1;
    }
    *per = s->count / (size_t)self->nranks;
    if (same_dtype(mod, s, rb) == 0) {
        if (*per >= 1)
            return 0;
        invalid(mod, "sendbuf must have at least %d elements (nranks), got %zu", self->nranks,
                s->count);
    }
    n4p_buffer_release(rb);
    n4p_buffer_release(s);
    return -1;
}

static PyObject *
b_reduce_scatter(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "op", "stream", NULL};
    PyObject *a[4];
    if (parse(args, nargs, kwnames, "reduce_scatter", kw, 3, 3, 4, a) < 0)
        return NULL;
    int op;
    cudaStream_t stream;
    if (get_op(a[2], &op) < 0 || get_stream(mod, a[3], &stream) < 0)
        return NULL;
    n4p_buffer s, rb;
    size_t per;
    PyObject *res = NULL;
    if (per_rank_buffers(mod, self, a[0], a[1], &s, &rb, &per) < 0)
        return NULL;
    if (rb.count < per) {
        invalid(mod, "recvbuf must have at least %zu elements (sendcount / nranks), got %zu", per,
                rb.count);
        goto out;
    }
    size_t es = n4p_dtype_size(s.dtype);
    intptr_t at = -(intptr_t)((size_t)self->rank * per * es);
    if (check_overlap(mod, "sendbuf", s.ptr, per * (size_t)self->nranks * es, "recvbuf", rb.ptr,
                      per * es, &at, "recvbuf is sendbuf + rank * recvcount") < 0)
        goto out;
    ncclReduceScatter_fn fn = (ncclReduceScatter_fn)n4p_fn(mod, N4P_IDX_ncclReduceScatter);
    if (fn == NULL)
        goto out;
    ncclResult_t r;
    CALL(fn(s.ptr, rb.ptr, per, (ncclDataType_t)s.dtype, (ncclRedOp_t)op, self->comm, stream));
    queued(self, a[3], &s, &rb, NULL);
    res = finish(mod, r);
out:
    n4p_buffer_release(&rb);
    n4p_buffer_release(&s);
    return res;
}
GUARDED(reduce_scatter)

/* ---------------------------------------------------------- data movement */

static PyObject *
b_broadcast(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "root", "stream", NULL};
    PyObject *a[4];
    if (parse(args, nargs, kwnames, "broadcast", kw, 3, 3, 4, a) < 0)
        return NULL;
    int root;
    cudaStream_t stream;
    if (get_rank_arg(mod, self, a[2], "root", &root) < 0 || get_stream(mod, a[3], &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0};
    int is_root = root == self->rank;
    PyObject *res = NULL;
    if (resolve(mod, self, a[1], "recvbuf", 1, &rb) < 0)
        return NULL;
    if (is_root) {
        if (resolve(mod, self, a[0], "sendbuf", 0, &s) < 0)
            goto out_r;
        if (same_dtype(mod, &s, &rb) < 0)
            goto out;
        if (rb.count != s.count) {
            invalid(mod, "Buffer count mismatch: recvbuf must have exactly %zu elements, got %zu",
                    s.count, rb.count);
            goto out;
        }
        if (same_or_disjoint(mod, &s, &rb, s.count) < 0)
            goto out;
    }
    ncclBroadcast_fn fn = (ncclBroadcast_fn)n4p_fn(mod, N4P_IDX_ncclBroadcast);
    if (fn == NULL)
        goto out;
    ncclResult_t r;
    CALL(fn(is_root ? s.ptr : NULL, rb.ptr, rb.count, (ncclDataType_t)rb.dtype, root, self->comm,
            stream));
    queued(self, a[3], &s, &rb, NULL);
    res = finish(mod, r);
out:
    if (is_root)
        n4p_buffer_release(&s);
out_r:
    n4p_buffer_release(&rb);
    return res;
}
GUARDED(broadcast)

static PyObject *
gather_impl(PyObject *mod, commobj *self, PyObject *sendobj, PyObject *recvobj, PyObject *rootobj,
            PyObject *streamobj)
{
    int root;
    cudaStream_t stream;
    if (get_stream(mod, streamobj, &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0};
    if (rooted_buffers(mod, self, sendobj, recvobj, rootobj, (size_t)self->nranks,
                       " (nranks * sendcount)", &root, &s, &rb) < 0)
        return NULL;
    PyObject *res = NULL;
    ncclResult_t r;
    if (root < 0) {
        ncclAllGather_fn fn = (ncclAllGather_fn)n4p_fn(mod, N4P_IDX_ncclAllGather);
        if (fn == NULL)
            goto out;
        CALL(fn(s.ptr, rb.ptr, s.count, (ncclDataType_t)s.dtype, self->comm, stream));
    } else {
        ncclGather_fn fn = (ncclGather_fn)n4p_fn(mod, N4P_IDX_ncclGather);
        if (fn == NULL)
            goto out;
        CALL(fn(s.ptr, rb.ptr, s.count, (ncclDataType_t)s.dtype, root, self->comm, stream));
    }
    queued(self, streamobj, &s, &rb, NULL);
    res = finish(mod, r);
out:
    n4p_buffer_release(&rb);
    n4p_buffer_release(&s);
    return res;
}

static PyObject *
b_allgather(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "stream", NULL};
    PyObject *a[3];
    if (parse(args, nargs, kwnames, "allgather", kw, 2, 3, 3, a) < 0)
        return NULL;
    return gather_impl(mod, self, a[0], a[1], NULL, a[2]);
}
GUARDED(allgather)

static PyObject *
b_gather(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "root", "stream", NULL};
    PyObject *a[4];
    if (parse(args, nargs, kwnames, "gather", kw, 2, 3, 4, a) < 0)
        return NULL;
    return gather_impl(mod, self, a[0], a[1], a[2], a[3]);
}
GUARDED(gather)

static PyObject *
b_alltoall(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "stream", NULL};
    PyObject *a[3];
    if (parse(args, nargs, kwnames, "alltoall", kw, 2, 2, 3, a) < 0)
        return NULL;
    cudaStream_t stream;
    if (get_stream(mod, a[2], &stream) < 0)
        return NULL;
    n4p_buffer s, rb;
    size_t per;
    PyObject *res = NULL;
    if (per_rank_buffers(mod, self, a[0], a[1], &s, &rb, &per) < 0)
        return NULL;
    if (rb.count < s.count) {
        invalid(mod, "Buffer count mismatch: recvbuf must have at least %zu elements "
                "(nranks * count), got %zu", s.count, rb.count);
        goto out;
    }
    if (same_or_disjoint(mod, &s, &rb, per * (size_t)self->nranks) < 0)
        goto out;
    ncclAlltoAll_fn fn = (ncclAlltoAll_fn)n4p_fn(mod, N4P_IDX_ncclAlltoAll);
    if (fn == NULL)
        goto out;
    ncclResult_t r;
    CALL(fn(s.ptr, rb.ptr, per, (ncclDataType_t)s.dtype, self->comm, stream));
    queued(self, a[2], &s, &rb, NULL);
    res = finish(mod, r);
out:
    n4p_buffer_release(&rb);
    n4p_buffer_release(&s);
    return res;
}
GUARDED(alltoall)

static PyObject *
b_scatter(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "root", "stream", NULL};
    PyObject *a[4];
    if (parse(args, nargs, kwnames, "scatter", kw, 3, 3, 4, a) < 0)
        return NULL;
    int root;
    cudaStream_t stream;
    if (get_rank_arg(mod, self, a[2], "root", &root) < 0 || get_stream(mod, a[3], &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0};
    int is_root = root == self->rank;
    PyObject *res = NULL;
    if (resolve(mod, self, a[1], "recvbuf", 1, &rb) < 0)
        return NULL;
    if (is_root) {
        if (resolve(mod, self, a[0], "sendbuf", 0, &s) < 0)
            goto out_r;
        size_t per = s.count / (size_t)self->nranks;
        if (same_dtype(mod, &s, &rb) < 0)
            goto out;
        if (per < 1) {
            invalid(mod, "sendbuf must have at least %d elements (nranks), got %zu", self->nranks,
                    s.count);
            goto out;
        }
        if (rb.count != per) {
            invalid(mod, "recvbuf must have exactly %zu elements (sendcount / nranks), got %zu",
                    per, rb.count);
            goto out;
        }
        size_t es = n4p_dtype_size(s.dtype);
        intptr_t at = -(intptr_t)((size_t)self->rank * per * es);
        if (check_overlap(mod, "sendbuf", s.ptr, per * (size_t)self->nranks * es, "recvbuf",
                          rb.ptr, per * es, &at, "recvbuf is sendbuf + rank * recvcount") < 0)
            goto out;
    }
    ncclScatter_fn fn = (ncclScatter_fn)n4p_fn(mod, N4P_IDX_ncclScatter);
    if (fn == NULL)
        goto out;
    ncclResult_t r;
    CALL(fn(is_root ? s.ptr : NULL, rb.ptr, rb.count, (ncclDataType_t)rb.dtype, root, self->comm,
            stream));
    queued(self, a[3], &s, &rb, NULL);
    res = finish(mod, r);
out:
    if (is_root)
        n4p_buffer_release(&s);
out_r:
    n4p_buffer_release(&rb);
    return res;
}
GUARDED(scatter)

/* ------------------------------------------------------------------- p2p */

static PyObject *
p2p_impl(PyObject *mod, commobj *self, PyObject *const *args, Py_ssize_t nargs,
         PyObject *kwnames, int is_send)
{
    static const char *const kws[] = {"sendbuf", "peer", "stream", NULL};
    static const char *const kwr[] = {"recvbuf", "peer", "stream", NULL};
    const char *fname = is_send ? "send" : "recv";
    PyObject *a[3];
    if (parse(args, nargs, kwnames, fname, is_send ? kws : kwr, 2, 2, 3, a) < 0)
        return NULL;
    int peer;
    cudaStream_t stream;
    if (get_rank_arg(mod, self, a[1], "peer", &peer) < 0 || get_stream(mod, a[2], &stream) < 0)
        return NULL;
    n4p_buffer b = {0};
    if (resolve(mod, self, a[0], is_send ? "sendbuf" : "recvbuf", !is_send, &b) < 0)
        return NULL;
    PyObject *res = NULL;
    ncclResult_t r;
    if (is_send) {
        ncclSend_fn fn = (ncclSend_fn)n4p_fn(mod, N4P_IDX_ncclSend);
        if (fn != NULL) {
            CALL(fn(b.ptr, b.count, (ncclDataType_t)b.dtype, peer, self->comm, stream));
            queued(self, a[2], &b, NULL, NULL);
            res = finish(mod, r);
        }
    } else {
        ncclRecv_fn fn = (ncclRecv_fn)n4p_fn(mod, N4P_IDX_ncclRecv);
        if (fn != NULL) {
            CALL(fn(b.ptr, b.count, (ncclDataType_t)b.dtype, peer, self->comm, stream));
            queued(self, a[2], &b, NULL, NULL);
            res = finish(mod, r);
        }
    }
    n4p_buffer_release(&b);
    return res;
}

static PyObject *
b_send(BODY_ARGS)
{
    return p2p_impl(mod, self, args, nargs, kwnames, 1);
}
GUARDED(send)

static PyObject *
b_recv(BODY_ARGS)
{
    return p2p_impl(mod, self, args, nargs, kwnames, 0);
}
GUARDED(recv)

/* ------------------------------------------------------------ RCCL extras */

static PyObject *
b_allreduce_with_bias(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "recvbuf", "op", "bias", "stream", NULL};
    PyObject *a[5];
    if (parse(args, nargs, kwnames, "allreduce_with_bias", kw, 4, 4, 5, a) < 0)
        return NULL;
    ncclAllReduceWithBias_fn fn = (ncclAllReduceWithBias_fn)n4p_fn(mod, N4P_IDX_ncclAllReduceWithBias);
    if (fn == NULL)
        return NULL;
    int op;
    cudaStream_t stream;
    if (get_op(a[2], &op) < 0 || get_stream(mod, a[4], &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0}, bias = {0};
    PyObject *res = NULL;
    if (resolve(mod, self, a[0], "sendbuf", 0, &s) < 0)
        return NULL;
    if (resolve(mod, self, a[1], "recvbuf", 1, &rb) < 0)
        goto out_s;
    if (resolve(mod, self, a[3], "bias", 0, &bias) < 0)
        goto out_r;
    if (same_dtype(mod, &s, &rb) < 0)
        goto out;
    if (bias.dtype != s.dtype) {
        invalid(mod, "Dtype mismatch: sendbuf has dtype %s, bias has dtype %s",
                dtype_name(s.dtype), dtype_name(bias.dtype));
        goto out;
    }
    if (rb.count < s.count || bias.count < s.count) {
        invalid(mod, "Buffer count mismatch: recvbuf and bias must have at least %zu elements, "
                "got %zu and %zu", s.count, rb.count, bias.count);
        goto out;
    }
    size_t bytes = s.count * n4p_dtype_size(s.dtype);
    if (same_or_disjoint(mod, &s, &rb, s.count) < 0 ||
        check_overlap(mod, "bias", bias.ptr, bytes, "recvbuf", rb.ptr, bytes, NULL,
                      "none: bias is read after recvbuf is written") < 0)
        goto out;
    ncclResult_t r;
    CALL(fn(s.ptr, rb.ptr, s.count, (ncclDataType_t)s.dtype, (ncclRedOp_t)op, self->comm, stream,
            bias.ptr));
    queued(self, a[4], &s, &rb, &bias);
    res = finish(mod, r);
out:
    n4p_buffer_release(&bias);
out_r:
    n4p_buffer_release(&rb);
out_s:
    n4p_buffer_release(&s);
    return res;
}
GUARDED(allreduce_with_bias)

/* counts/displacements: one per rank, non-negative; extents within the buffer */
static int
get_layout(PyObject *mod, commobj *self, PyObject *counts, PyObject *displs, const char *cname,
           const char *dname, const char *bufname, size_t bufcount, size_t **c, size_t **d)
{
    Py_ssize_t nc, nd;
    int oc, od;
    *c = *d = NULL;
    if (counts == Py_None || displs == Py_None || PyLong_Check(counts) || PyLong_Check(displs)) {
        invalid(mod, "%s and %s must be sequences of one int per rank", cname, dname);
        return -1;
    }
    if (n4p_arg_size_array(counts, cname, c, &nc, &oc) < 0)
        return -1;
    if (n4p_arg_size_array(displs, dname, d, &nd, &od) < 0) {
        PyMem_Free(*c);
        *c = NULL;
        return -1;
    }
    if (nc != self->nranks || nd != self->nranks) {
        invalid(mod, "%s and %s must have one entry per rank (%d), got %zd and %zd", cname, dname,
                self->nranks, nc, nd);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        if ((*c)[i] > bufcount || (*d)[i] > bufcount - (*c)[i]) {
            invalid(mod, "%s[%zd] + %s[%zd] = %zu exceeds %s's %zu elements", dname, i, cname, i,
                    (*d)[i] + (*c)[i], bufname, bufcount);
            goto fail;
        }
    }
    return 0;
fail:
    PyMem_Free(*c);
    PyMem_Free(*d);
    *c = *d = NULL;
    return -1;
}

static PyObject *
b_alltoallv(BODY_ARGS)
{
    static const char *const kw[] = {"sendbuf", "sendcounts", "sdispls", "recvbuf", "recvcounts",
                                     "rdispls", "stream", NULL};
    PyObject *a[7];
    if (parse(args, nargs, kwnames, "alltoallv", kw, 6, 6, 7, a) < 0)
        return NULL;
    ncclAllToAllv_fn fn = (ncclAllToAllv_fn)n4p_fn(mod, N4P_IDX_ncclAllToAllv);
    if (fn == NULL)
        return NULL;
    cudaStream_t stream;
    if (get_stream(mod, a[6], &stream) < 0)
        return NULL;
    n4p_buffer s = {0}, rb = {0};
    size_t *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL;
    PyObject *res = NULL;
    if (resolve(mod, self, a[0], "sendbuf", 0, &s) < 0)
        return NULL;
    if (resolve(mod, self, a[3], "recvbuf", 1, &rb) < 0)
        goto out_s;
    if (same_dtype(mod, &s, &rb) < 0 ||
        get_layout(mod, self, a[1], a[2], "sendcounts", "sdispls", "sendbuf", s.count, &sc, &sd) < 0 ||
        get_layout(mod, self, a[4], a[5], "recvcounts", "rdispls", "recvbuf", rb.count, &rc, &rd) < 0)
        goto out;
    /* in place: the same memory with the same layout for sending and receiving */
    size_t nr = (size_t)self->nranks;
    int same_layout = memcmp(sc, rc, nr * sizeof *sc) == 0 && memcmp(sd, rd, nr * sizeof *sd) == 0;
    if (check_overlap(mod, "sendbuf", s.ptr, s.count * n4p_dtype_size(s.dtype), "recvbuf", rb.ptr,
                      rb.count * n4p_dtype_size(rb.dtype), same_layout ? &same_address : NULL,
                      "sendbuf is recvbuf, with the same counts and displacements") < 0)
        goto out;
    ncclResult_t r;
    CALL(fn(s.ptr, sc, sd, rb.ptr, rc, rd, (ncclDataType_t)s.dtype, self->comm, stream));
    queued(self, a[6], &s, &rb, NULL);
    res = finish(mod, r);
out:
    PyMem_Free(sc);
    PyMem_Free(sd);
    PyMem_Free(rc);
    PyMem_Free(rd);
    n4p_buffer_release(&rb);
out_s:
    n4p_buffer_release(&s);
    return res;
}
GUARDED(alltoallv)

/* ------------------------------------------------------------ the type */

static int
cb_init(commobj *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"ptr", NULL};
    PyObject *v = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:Communicator", kw, &v))
        return -1;
    void *p = NULL;
    if (v != NULL && v != Py_None && n4p_arg_ptr(v, "ptr", &p) < 0)
        return -1;
    self->comm = (ncclComm_t)p;
    self->pid = current_pid;
    reset_cache(self);
    return 0;
}

static PyObject *
cb_get_ptr(commobj *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(self->comm);
}

static PyObject *
cb_get_address(commobj *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(&self->comm);
}

static PyObject *
cb_get_is_valid(commobj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->comm != NULL);
}

static PyObject *
cb_set_ptr(commobj *self, PyObject *v)
{
    void *p = NULL;
    if (v != Py_None && n4p_arg_ptr(v, "ptr", &p) < 0)
        return NULL;
    self->comm = (ncclComm_t)p;
    self->pid = current_pid; /* made (or adopted) by this process */
    reset_cache(self);
    Py_RETURN_NONE;
}

/* The module of a METH_METHOD call, and its one string argument. */
static PyObject *
method_str_arg(PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs, const char *fname,
               const char **op)
{
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s() needs the operation's name", fname);
        return NULL;
    }
    if ((*op = PyUnicode_AsUTF8(args[0])) == NULL)
        return NULL;
    return PyType_GetModule(cls);
}

static PyObject *
cb_check(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
         PyObject *Py_UNUSED(kwnames))
{
    const char *op;
    PyObject *mod = method_str_arg(cls, args, nargs, "_check", &op);
    if (mod == NULL || check_valid(mod, self, op) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _acquire(op, exclusive=False) -> handle: become the thread using the
 * communicator (as the C methods do at their entry) until _release().
 * exclusive: also refuse while calls on it are queued in an open group. */
static PyObject *
cb_acquire(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
           PyObject *Py_UNUSED(kwnames))
{
    const char *op;
    PyObject *mod = method_str_arg(cls, args, nargs, "_acquire", &op);
    if (mod == NULL || enter(mod, self, op) < 0)
        return NULL;
    int exclusive = nargs > 1 ? PyObject_IsTrue(args[1]) : 0;
    if (exclusive != 0 && (exclusive < 0 || atomic_load(&self->pending) > 0)) {
        if (exclusive > 0)
            invalid(mod, "Cannot %s: calls on this communicator are queued in an open group; "
                    "end the group (group_end) first", op);
        leave(self);
        return NULL;
    }
    return PyLong_FromVoidPtr(self->comm);
}

static PyObject *
cb_release(commobj *self, PyObject *Py_UNUSED(unused))
{
    if (self->owner_depth > 0 &&
        atomic_load(&self->owner) == PyThread_get_thread_ident())
        leave(self);
    Py_RETURN_NONE;
}

/* _take_handle(abort) -> handle to destroy (abort: to abort), or 0 when
 * there is nothing for the library to do: a null communicator, a fork()
 * child (the handle is only forgotten: the library state is the parent's),
 * or an abort while calls are queued in an open group (carried out when
 * that group ends).  The communicator is null afterwards.  destroy refuses
 * (NcclInvalid) while another thread is in a call on it or while calls on it
 * are queued; abort never refuses: it is how another thread interrupts a
 * blocked call. */
static PyObject *
cb_take_handle(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
               PyObject *Py_UNUSED(kwnames))
{
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL)
        return NULL;
    int is_abort = nargs > 0 ? PyObject_IsTrue(args[0]) : 0;
    if (is_abort < 0)
        return NULL;
    ncclComm_t h = self->comm;
    if (h == NULL)
        return PyLong_FromLong(0);
    if (self->pid == current_pid && n4p_trace_take(self->trace)) {
        self->comm = NULL; /* the watchdog aborted it */
        reset_cache(self);
        return PyLong_FromLong(0);
    }
    if (self->pid != current_pid) {
        self->comm = NULL;
        reset_cache(self);
        return PyLong_FromLong(0);
    }
    if (!is_abort) {
        if (atomic_load(&self->owner) != 0 || atomic_load(&self->active) > 0) {
            busy(mod, "destroy", "a call on it has not returned; abort() interrupts it");
            return NULL;
        }
        if (atomic_load(&self->pending) > 0) {
            invalid(mod, "Cannot destroy: calls on this communicator are queued in an open group "
                    "and run at its end; end the group (group_end) first, or abort()");
            return NULL;
        }
    }
    self->comm = NULL;
    reset_cache(self);
    if (is_abort && atomic_load(&self->pending) > 0) {
        self->deferred_abort = h;
        return PyLong_FromLong(0);
    }
    return PyLong_FromVoidPtr(h);
}

/* _queued(*objs) -> bool: inside a group, count a call queued on this
 * communicator (so that destroy waits for its group end) and keep objs
 * alive until the outermost group end; outside a group, False. */
static PyObject *
cb_queued(commobj *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (n4p_group_depth() == 0)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < nargs; i++)
        n4p_group_keep(args[i], NULL);
    keep_queued(self, NULL, NULL, NULL, NULL);
    Py_RETURN_TRUE;
}

static PyObject *
cb_info(commobj *self, PyTypeObject *cls, PyObject *const *Py_UNUSED(args),
        Py_ssize_t Py_UNUSED(nargs), PyObject *Py_UNUSED(kwnames))
{
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL || check_valid(mod, self, "query the communicator") < 0 ||
        ensure_info(mod, self) < 0)
        return NULL;
    return Py_BuildValue("(iiii)", self->nranks, self->rank, self->dev_type, self->dev_id);
}

static void
cb_dealloc(commobj *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    tp->tp_clear((PyObject *)self);
    n4p_trace_free(self->trace);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
cb_traverse(commobj *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int
cb_clear(commobj *Py_UNUSED(self))
{
    return 0;
}

static PyObject *
cb_trace_setup(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    PyObject *mod = PyType_GetModule(cls);
    return mod == NULL ? NULL : n4p_trace_setup(mod, &self->trace, &self->owner, self->comm,
                                                args, nargs, kwnames);
}

static PyObject *
cb_dump_trace(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    static const char *const kw[] = {"path", NULL};
    PyObject *a[1];
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL || n4p_parse_args(args, nargs, kwnames, "dump_trace", kw, 0, 1, a) < 0)
        return NULL;
    return n4p_trace_dump(mod, self->trace, a[0], "request");
}

#define CMETHOD(name, doc)                                                                     \
    {#name, (PyCFunction)(void (*)(void))c_##name, METH_METHOD | METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef cb_methods[] = {
    CMETHOD(allreduce, "allreduce(sendbuf, recvbuf, op, stream=None)"),
    CMETHOD(reduce, "reduce(sendbuf, recvbuf, op, root=None, *, stream=None)\n"
                    "root=None reduces to every rank (an all-reduce)."),
    CMETHOD(reduce_scatter, "reduce_scatter(sendbuf, recvbuf, op, *, stream=None)"),
    CMETHOD(broadcast, "broadcast(sendbuf, recvbuf, root, *, stream=None)"),
    CMETHOD(allgather, "allgather(sendbuf, recvbuf, stream=None)"),
    CMETHOD(gather, "gather(sendbuf, recvbuf, root=None, *, stream=None)\n"
                    "root=None gathers to every rank (an all-gather)."),
    CMETHOD(alltoall, "alltoall(sendbuf, recvbuf, *, stream=None)"),
    CMETHOD(scatter, "scatter(sendbuf, recvbuf, root, *, stream=None)"),
    CMETHOD(send, "send(sendbuf, peer, *, stream=None)"),
    CMETHOD(recv, "recv(recvbuf, peer, *, stream=None)"),
    CMETHOD(allreduce_with_bias, "allreduce_with_bias(sendbuf, recvbuf, op, bias, *, stream=None)\n"
                                 "RCCL only: all-reduce, then add bias elementwise."),
    CMETHOD(alltoallv, "alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, *, "
                       "stream=None)\nRCCL only; counts and displacements in elements, one per rank."),
    {"_info", (PyCFunction)(void (*)(void))cb_info, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "(nranks, rank, DLPack device type, device id), queried once and cached."},
    {"_set_ptr", (PyCFunction)cb_set_ptr, METH_O,
     "Replace the handle (made or adopted by this process) and forget cached info."},
    {"_check", (PyCFunction)(void (*)(void))cb_check, METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "_check(op): NcclInvalid unless the communicator is initialized and of this process."},
    {"_acquire", (PyCFunction)(void (*)(void))cb_acquire,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "_acquire(op, exclusive=False) -> handle: use the communicator from this thread until "
     "_release() (NcclInvalid when another thread is in a call on it)."},
    {"_release", (PyCFunction)cb_release, METH_NOARGS, "End what _acquire() began."},
    {"_take_handle", (PyCFunction)(void (*)(void))cb_take_handle,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "_take_handle(abort) -> handle for ncclCommDestroy/ncclCommAbort, or 0 (nothing to do); "
     "the communicator is null afterwards."},
    {"_queued", (PyCFunction)(void (*)(void))cb_queued, METH_FASTCALL,
     "_queued(*objs) -> bool: inside a group, keep objs and count a queued call."},
    {"_trace_setup", (PyCFunction)(void (*)(void))cb_trace_setup,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "_trace_setup(timeout=None, comm_hash=None, rank=None, nranks=None): watchdog timeout "
     "(seconds, 0: off; None: NCCL4PY_WATCHDOG_TIMEOUT), hash, rank and size of the "
     "communicator for its flight record."},
    {"dump_trace", (PyCFunction)(void (*)(void))cb_dump_trace,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "dump_trace(path=None) -> path: write this communicator's flight record (JSON) to path, "
     "or to NCCL4PY_TRACE_DIR/rank<R>.json."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cb_getset[] = {
    {"ptr", (getter)cb_get_ptr, NULL, "the ncclComm_t handle as an int (0 when null)", NULL},
    {"is_valid", (getter)cb_get_is_valid, NULL, "True unless the communicator is null", NULL},
    {"_comm_address", (getter)cb_get_address, NULL,
     "address of the handle slot (out-parameter for the library)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot cb_slots[] = {
    {Py_tp_doc, "C base of nccl.core.Communicator."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, cb_init},
    {Py_tp_dealloc, cb_dealloc},
    {Py_tp_traverse, cb_traverse},
    {Py_tp_clear, cb_clear},
    {Py_tp_methods, cb_methods},
    {Py_tp_getset, cb_getset},
    {0, NULL},
};

static PyType_Spec cb_spec = {
    .name = "nccl._nccl._CommunicatorBase",
    .basicsize = sizeof(commobj),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = cb_slots,
};

int
n4p_init_communicator(PyObject *mod, n4p_state *st)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, init_pid);
    PyObject *tp = PyType_FromModuleAndSpec(mod, &cb_spec, NULL);
    if (tp == NULL)
        return -1;
    st->comm_base_type = (PyTypeObject *)tp;
    return PyModule_AddObjectRef(mod, "_CommunicatorBase", tp);
}
