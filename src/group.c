/*
 * group.c - groups, and the lifetime of what is queued in them.
 *
 * Between ncclGroupStart and the outermost ncclGroupEnd the library only
 * queues the calls: it reads and writes their buffers, and fills the handles
 * they create, at that group end.  group_start, group_end and
 * group_simulate_end (the nccl.bindings functions, which nccl.core calls
 * too) count the depth per thread, as the library does, and every nccl.core
 * call made while it is positive hands what the library may still use to
 * this thread's keep list: its resolved buffers with their exports (DLPack
 * managed tensors, Py_buffer views), its stream object, the objects that hold
 * out-parameter slots, and the communicator (whose pending count lets
 * destroy() refuse while calls are queued).  The outermost group end -
 * whatever it returns, group_simulate_end as well - releases the list once
 * the library has returned, then runs the callbacks deferred to it.
 *
 * Outside a group nothing is kept: a call releases its buffers when it
 * returns.  The low level (nccl.bindings with integer addresses) keeps
 * nothing alive: lifetimes are the caller's business there.
 */
#include "bindings.h"

#include <string.h>

_Thread_local int n4p_group_depth_tls;
/* Threads with a group open: while 0 (the common case) the hot paths skip
 * the thread-local read. */
atomic_int n4p_groups_open;

typedef struct {
    PyObject *obj;
    const n4p_keep_hooks *hooks;
} keep_entry;

typedef struct {
    n4p_buffer *bufs;
    size_t nbufs, capbufs;
    keep_entry *objs;
    size_t nobjs, capobjs;
} keep_list;

static _Thread_local keep_list keep;

/* What group_ended runs after the library returned (deferred callbacks,
 * hooks) may run Python code, and a signal that arrives meanwhile is handled
 * there, by Python, at once: the exception its handler raises (no
 * Exception: KeyboardInterrupt, SystemExit) is kept here and raised by the
 * group end, never written off as unraisable; the first one counts. */
static _Thread_local PyObject *interrupt_type, *interrupt_value, *interrupt_tb;

/* After a callback or hook that may have left an exception set. */
static void
after_python(PyObject *what)
{
    if (!PyErr_Occurred())
        return;
    if (interrupt_type == NULL && !PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Fetch(&interrupt_type, &interrupt_value, &interrupt_tb);
    else
        PyErr_WriteUnraisable(what);
}

/* Callbacks deferred to the outermost group end: the entry is called. */
static void
call_deferred(PyObject *fn)
{
    PyObject *r = PyObject_CallNoArgs(fn);
    if (r == NULL)
        after_python(fn);
    Py_XDECREF(r);
}

static const n4p_keep_hooks deferred_call = {NULL, call_deferred};

/* Grow an array of `size`-byte items to hold one more; 0 or -1. */
static int
reserve(void **items, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? 2 * *cap : 16;
    void *p = PyMem_Realloc(*items, ncap * size);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = ncap;
    return 0;
}

void
n4p_group_keep_buffer(n4p_buffer *b)
{
    if (!b->have_view && b->managed == NULL && b->ref == NULL)
        return; /* nothing owned */
    /* Out of memory: the export is leaked rather than released under the
     * library's feet. */
    if (reserve((void **)&keep.bufs, keep.nbufs, &keep.capbufs, sizeof *keep.bufs) == 0)
        keep.bufs[keep.nbufs++] = *b;
    b->have_view = 0;
    b->managed = NULL;
    b->ref = NULL;
}

void
n4p_group_keep(PyObject *o, const n4p_keep_hooks *hooks)
{
    Py_INCREF(o); /* leaked when the list cannot grow: never released early */
    if (reserve((void **)&keep.objs, keep.nobjs, &keep.capobjs, sizeof *keep.objs) == 0)
        keep.objs[keep.nobjs++] = (keep_entry){o, hooks};
}

/* Before the library's outermost group end runs the queue. */
static void
group_ending(void)
{
    for (size_t i = 0; i < keep.nobjs; i++)
        if (keep.objs[i].hooks != NULL && keep.objs[i].hooks->group_ending != NULL)
            keep.objs[i].hooks->group_ending(keep.objs[i].obj);
}

/* After it returned: release everything, then run the deferred callbacks.
 * The list is detached first, so that what runs here may open new groups. */
static void
group_ended(void)
{
    keep_list k = keep;
    memset(&keep, 0, sizeof keep);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (size_t i = 0; i < k.nbufs; i++)
        n4p_buffer_release(&k.bufs[i]);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < k.nobjs; i++) {
            const n4p_keep_hooks *h = k.objs[i].hooks;
            if (h != NULL && h->group_ended != NULL && (h == &deferred_call) == (pass == 1)) {
                h->group_ended(k.objs[i].obj);
                after_python(k.objs[i].obj);
            }
        }
    }
    for (size_t i = 0; i < k.nobjs; i++)
        Py_DECREF(k.objs[i].obj);
    PyMem_Free(k.bufs);
    PyMem_Free(k.objs);
    if (et == NULL) { /* the call raised nothing itself: an interrupt meanwhile is raised */
        et = interrupt_type, ev = interrupt_value, tb = interrupt_tb;
    } else { /* the call's own exception (a handler's, during its wait) counts */
        Py_XDECREF(interrupt_type);
        Py_XDECREF(interrupt_value);
        Py_XDECREF(interrupt_tb);
    }
    interrupt_type = interrupt_value = interrupt_tb = NULL;
    PyErr_Restore(et, ev, tb);
}

/* ----------------------------------------------------------- the wrappers
 * Hand-written entries of the API table (flag "hand"): their docstrings and
 * method-table entries are generated (gen/wrappers.c). */

PyObject *
n4p_w_group_start(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (n4p_parse_args(args, nargs, kwnames, "group_start", NULL, 0, 0, NULL) < 0)
        return NULL;
    ncclGroupStart_fn fn = (ncclGroupStart_fn)n4p_fn(mod, N4P_IDX_ncclGroupStart);
    if (fn == NULL)
        return NULL;
    ncclResult_t r;
    CALL(fn());
    if (!n4p_status_failed(r) && n4p_group_depth_tls++ == 0)
        atomic_fetch_add(&n4p_groups_open, 1);
    return n4p_status_none(mod, r);
}

/* The library decrements its depth on every group end called at depth > 0,
 * whatever the end returns; so do we. */
#define END_GROUP(call)                                                                        \
    do {                                                                                       \
        int outermost_ = n4p_group_depth_tls == 1;                                             \
        if (outermost_)                                                                        \
            group_ending();                                                                    \
        CALL(call);                                                                            \
        if (n4p_group_depth_tls > 0 && --n4p_group_depth_tls == 0)                             \
            atomic_fetch_sub(&n4p_groups_open, 1);                                             \
        if (outermost_)                                                                        \
            group_ended();                                                                     \
    } while (0)

PyObject *
n4p_w_group_end(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (n4p_parse_args(args, nargs, kwnames, "group_end", NULL, 0, 0, NULL) < 0)
        return NULL;
    ncclGroupEnd_fn fn = (ncclGroupEnd_fn)n4p_fn(mod, N4P_IDX_ncclGroupEnd);
    if (fn == NULL)
        return NULL;
    ncclResult_t r;
    END_GROUP(fn());
    return n4p_status_none(mod, r);
}

/* group_simulate_end() returns a new SimInfo (nccl4py 0.2);
 * group_simulate_end(sim_info) fills the caller's (0.3). */
PyObject *
n4p_w_group_simulate_end(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    static const char *const kw[] = {"sim_info", NULL};
    PyObject *a[1];
    if (n4p_parse_args(args, nargs, kwnames, "group_simulate_end", kw, 0, 1, a) < 0)
        return NULL;
    ncclGroupSimulateEnd_fn fn =
        (ncclGroupSimulateEnd_fn)n4p_fn(mod, N4P_IDX_ncclGroupSimulateEnd);
    if (fn == NULL)
        return NULL;
    n4p_state *st = n4p_get_state(mod);
    PyObject *obj = NULL;
    void *p;
    if (a[0] == NULL) {
        if ((obj = n4p_struct_new(st, N4P_S_SIM_INFO)) == NULL)
            return NULL;
        p = n4p_struct_ptr(st, N4P_S_SIM_INFO, obj);
    } else if (n4p_arg_struct(st, N4P_S_SIM_INFO, a[0], "sim_info", 0, &p) < 0) {
        return NULL;
    }
    ncclResult_t r;
    END_GROUP(fn((ncclSimInfo_t *)p));
    if (n4p_status_failed(r) || PyErr_Occurred()) { /* or interrupted as it ended */
        Py_XDECREF(obj);
        return n4p_raise_status(mod, r);
    }
    return obj != NULL ? obj : Py_NewRef(Py_None);
}

/* ----------------------------------------------- helpers for nccl.core */

static PyObject *
py_group_depth(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    return PyLong_FromLong(n4p_group_depth_tls);
}

static PyObject *
py_group_keep(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (n4p_group_depth_tls == 0)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < nargs; i++)
        n4p_group_keep(args[i], NULL);
    Py_RETURN_TRUE;
}

static PyObject *
py_group_defer(PyObject *Py_UNUSED(mod), PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_group_defer() needs a callable");
        return NULL;
    }
    if (n4p_group_depth_tls == 0)
        Py_RETURN_FALSE;
    n4p_group_keep(fn, &deferred_call);
    Py_RETURN_TRUE;
}

PyMethodDef n4p_group_methods[] = {
    {"_group_depth", py_group_depth, METH_NOARGS,
     "The group depth of this thread (0: no group open)."},
    {"_group_keep", (PyCFunction)(void (*)(void))py_group_keep, METH_FASTCALL,
     "_group_keep(*objs)\n--\n\nInside a group, keep objs alive until the outermost group end "
     "and return True; outside, return False."},
    {"_group_defer", py_group_defer, METH_O,
     "_group_defer(fn)\n--\n\nInside a group, call fn() after the outermost group end and return "
     "True; outside, return False."},
    {NULL, NULL, 0, NULL},
};
