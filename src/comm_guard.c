/*
 * comm_guard.c - the rules every call on a communicator obeys.
 *
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
 *
 * The C calls (communicator.c) take the communicator with n4p_comm_enter()
 * (communicator.h); the Python methods of nccl.core.Communicator with
 * _acquire() / _release().
 */
#include "communicator.h"

#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>

/* The current process id, kept up to date in fork() children. */
pid_t n4p_current_pid;

static void
after_fork_child(void)
{
    n4p_current_pid = getpid();
}

static void
init_pid(void)
{
    n4p_current_pid = getpid();
    (void)pthread_atfork(NULL, NULL, after_fork_child);
}

pid_t
n4p_comm_pid(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, init_pid);
    return n4p_current_pid;
}

PyObject *
n4p_comm_invalid(PyObject *mod, const char *fmt, ...)
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

void
n4p_comm_reset_cache(commobj *self)
{
    self->nranks = -1;
    self->rank = -1;
    self->dev_type = -1;
    self->dev_id = -1;
}

int
n4p_comm_check_valid(PyObject *mod, commobj *self, const char *op)
{
    if (n4p_trace_check(mod, self->trace, &N4P_HANDLE(self), op) < 0) {
        N4P_FT_STORE(&self->comm, NULL); /* the watchdog aborted it */
        return -1;
    }
    if (N4P_FT_LOAD(&self->comm) == NULL) { /* filled since? */
        N4P_FT_STORE(&self->comm, (ncclComm_t)n4p_slot_get(&self->handle));
    }
    if (N4P_FT_LOAD(&self->comm) == NULL) {
        n4p_comm_invalid(mod, "Cannot %s: Communicator not initialized", op);
        return -1;
    }
    if (self->pid != n4p_current_pid) {
        n4p_comm_invalid(mod, "Cannot %s: this communicator belongs to process %d, and this is "
                         "its fork() child %d; a child cannot take part in the parent's "
                         "communicators (create a new one in the child)", op, (int)self->pid,
                         (int)n4p_current_pid);
        return -1;
    }
    return 0;
}

int
n4p_comm_busy(PyObject *mod, const char *op, const char *why)
{
    n4p_comm_invalid(mod, "Cannot %s: the communicator is in use by another thread (%s); calls "
                     "on one communicator must not overlap: give each thread its own "
                     "communicator, or serialize the calls with a lock", op, why);
    return -1;
}

/* ----------------------------------------------------------- grouped calls */

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

void
n4p_comm_keep_queued(commobj *self, PyObject *stream, n4p_buffer *bufs, unsigned which)
{
    for (int i = 0; which >> i; i++)
        if (which >> i & 1u)
            n4p_group_keep_buffer(&bufs[i]);
    if (stream != NULL && stream != Py_None && !PyLong_CheckExact(stream))
        n4p_group_keep(stream, NULL);
    atomic_fetch_add(&self->pending, 1);
    n4p_group_keep((PyObject *)self, &comm_hooks);
}

/* ------------------------------------------------------ the Python methods */

/* The module of a METH_METHOD call on self whose first argument, the
 * operation's name (*op), has passed check(mod, self, op); NULL with an
 * exception otherwise. */
static PyObject *
method_checked(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
               const char *fname, int (*check)(PyObject *, commobj *, const char *),
               const char **op)
{
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s() needs the operation's name", fname);
        return NULL;
    }
    if ((*op = PyUnicode_AsUTF8(args[0])) == NULL)
        return NULL;
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL || check(mod, self, *op) < 0)
        return NULL;
    return mod;
}

PyObject *
n4p_comm_check(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
               PyObject *Py_UNUSED(kwnames))
{
    const char *op;
    if (method_checked(self, cls, args, nargs, "_check", n4p_comm_check_valid, &op) == NULL)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *
n4p_comm_acquire(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *Py_UNUSED(kwnames))
{
    const char *op;
    PyObject *mod = method_checked(self, cls, args, nargs, "_acquire", n4p_comm_enter, &op);
    if (mod == NULL)
        return NULL;
    int exclusive = nargs > 1 ? PyObject_IsTrue(args[1]) : 0;
    if (exclusive != 0 && (exclusive < 0 || atomic_load(&self->pending) > 0)) {
        if (exclusive > 0)
            n4p_comm_invalid(mod, "Cannot %s: calls on this communicator are queued in an open "
                             "group; end the group (group_end) first", op);
        n4p_comm_leave(self);
        return NULL;
    }
    return PyLong_FromVoidPtr(self->comm);
}

PyObject *
n4p_comm_release(commobj *self, PyObject *Py_UNUSED(unused))
{
    if (atomic_load(&self->owner) == PyThread_get_thread_ident() && self->owner_depth > 0)
        n4p_comm_leave(self);
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
PyObject *
n4p_comm_take_handle(commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *Py_UNUSED(kwnames))
{
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL)
        return NULL;
    int is_abort = nargs > 0 ? PyObject_IsTrue(args[0]) : 0;
    if (is_abort < 0)
        return NULL;
    ncclComm_t h = (ncclComm_t)n4p_slot_get(&self->handle);
    if (h == NULL)
        return PyLong_FromLong(0);
    if (self->pid == n4p_current_pid && n4p_trace_take(self->trace)) {
        n4p_comm_set(self, NULL); /* the watchdog aborted it */
        n4p_comm_reset_cache(self);
        return PyLong_FromLong(0);
    }
    if (self->pid != n4p_current_pid) {
        n4p_comm_set(self, NULL);
        n4p_comm_reset_cache(self);
        return PyLong_FromLong(0);
    }
    if (!is_abort) {
        /* destroy takes the owner word for its check and its nulling, so that
         * no call can enter between them (with threads running at once; with
         * a GIL no other thread runs here anyway) */
        unsigned long expected = 0;
        if (!atomic_compare_exchange_strong(&self->owner, &expected,
                                            PyThread_get_thread_ident()) ||
            atomic_load(&self->active) > 0) {
            if (expected == 0)
                atomic_store(&self->owner, 0);
            n4p_comm_busy(mod, "destroy", "a call on it has not returned; abort() interrupts it");
            return NULL;
        }
        if (atomic_load(&self->pending) > 0) {
            atomic_store(&self->owner, 0);
            return n4p_comm_invalid(mod, "Cannot destroy: calls on this communicator are "
                                    "queued in an open group and run at its end; end the "
                                    "group (group_end) first, or abort()");
        }
        n4p_comm_set(self, NULL);
        n4p_comm_reset_cache(self);
        atomic_store(&self->owner, 0);
        return PyLong_FromVoidPtr(h);
    }
    n4p_comm_set(self, NULL);
    n4p_comm_reset_cache(self);
    if (is_abort && atomic_load(&self->pending) > 0) {
        self->deferred_abort = h;
        return PyLong_FromLong(0);
    }
    return PyLong_FromVoidPtr(h);
}

/* _queued(*objs) -> bool: inside a group, count a call queued on this
 * communicator (so that destroy waits for its group end) and keep objs
 * alive until the outermost group end; outside a group, False. */
PyObject *
n4p_comm_queued(commobj *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (n4p_group_depth() == 0)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < nargs; i++)
        n4p_group_keep(args[i], NULL);
    n4p_comm_keep_queued(self, NULL, NULL, 0);
    Py_RETURN_TRUE;
}
