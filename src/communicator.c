/*
 * communicator.c - the C base of nccl.core.Communicator: the hot paths.
 *
 * `_CommunicatorBase` holds the ncclComm_t in a slot (slot.c: the library
 * writes it directly, see `_comm_address`, and may do so after the object is
 * gone, from a non-blocking init or at a group's end) and
 * caches the communicator's size, rank and device.  Its collective and p2p
 * methods are the lines of collectives.def, and every one of them runs
 * through the same four steps without returning to Python:
 *
 *   parse    the arguments, by the keywords of the method's roles; ops,
 *            roots, peers and the stream are converted (parse_call)
 *   check    the buffers are resolved and checked against the method's rule:
 *            dtypes, counts, device, the in-place form (call_checks.c)
 *   run      the library call with the GIL released (run_call): the one
 *            place that sees every call, filled in as an n4p_call
 *   cleanup  the buffers are released, or inside a group handed to the
 *            group's keep list with the stream and the communicator
 *
 * between the guard's enter and leave (comm_guard.c: one thread at a time,
 * not in a fork() child, group bookkeeping).  Everything else of
 * Communicator (life cycle, resources, properties) is in
 * nccl/core/communicator.py, a Python subclass.
 */
#include "communicator.h"

#include <pthread.h>
#include <string.h>

#include "gen/coll_docs.h"

/* ----------------------------------------------------------- the table */

const char *const n4p_coll_keywords[A_COUNT] = {
#define N4P_ARG(ROLE, keyword, type, doc) [ROLE] = #keyword,
#include "collectives.def"
};
enum {
#define N4P_COLL(method, RULE, fn, fn_all, required, positional, roles) C_##method,
#include "collectives.def"
    C_COUNT
};

#define ROLES(...) {__VA_ARGS__}
typedef struct {
    const char *name;
    Py_ssize_t required, positional;
    Py_ssize_t nargs;                  /* filled at init from roles, like kw, at, rank_role */
    const char *kw[N4P_MAXARGS + 1];   /* their keywords */
    int rule;
    int fn, fn_all;                    /* the library function; fn_all: for root=None */
    int fn_cfg, fn_all_cfg;            /* the same with config= (-1: no config=) */
    int rank_role;                     /* A_ROOT, A_ROOT_ANY, A_PEER or A_NONE */
    unsigned char roles[N4P_MAXARGS];  /* A_NONE-terminated */
    signed char at[A_COUNT];           /* role -> index (-1: none) */
} coll_t;

static coll_t colls[C_COUNT] = {
#define N4P_COLL(method, RULE, f, f_all, nreq, npos, rl)                                \
    {.name = #method, .rule = RULE, .fn = N4P_IDX_##f, .fn_all = N4P_IDX_##f_all,        \
     .fn_cfg = -1, .fn_all_cfg = -1, .required = nreq, .positional = npos, .roles = ROLES rl},
#include "collectives.def"
};

static const struct {
    int which, fn, fn_all;
} coll_configs[] = {
#define N4P_COLL_CONFIG(method, f, f_all) {C_##method, N4P_IDX_##f, N4P_IDX_##f_all},
#include "collectives.def"
};

static void
init_table(void)
{
    for (size_t i = 0; i < sizeof coll_configs / sizeof coll_configs[0]; i++) {
        coll_t *d = &colls[coll_configs[i].which];
        d->fn_cfg = coll_configs[i].fn;
        d->fn_all_cfg = coll_configs[i].fn_all;
        int n = 0;
        while (n < N4P_MAXARGS && d->roles[n] != A_NONE)
            n++;
        if (n + 1 < N4P_MAXARGS) { /* no room: no config= (tests/test_core_0_6.py fails) */
            d->roles[n] = A_CONFIG; /* keyword-only: after the positional ones */
            d->roles[n + 1] = A_NONE;
        }
    }
    for (int c = 0; c < C_COUNT; c++) {
        coll_t *d = &colls[c];
        memset(d->at, -1, sizeof d->at);
        d->rank_role = A_NONE;
        for (d->nargs = 0; d->nargs < N4P_MAXARGS && d->roles[d->nargs] != A_NONE; d->nargs++) {
            int role = d->roles[d->nargs];
            d->kw[d->nargs] = n4p_coll_keywords[role];
            d->at[role] = (signed char)d->nargs;
            if (role == A_ROOT || role == A_ROOT_ANY || role == A_PEER)
                d->rank_role = role;
        }
    }
}

/* ------------------------------------------------------ the communicator */

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
    /* the host backend reports ncclCommInitAll's device index too */
    ncclCommCuDevice_fn cu = (ncclCommCuDevice_fn)n4p_fns[N4P_IDX_ncclCommCuDevice];
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
    self->dev_type = host ? N4P_DEV_CPU
                   : n4p_library_kind == N4P_LIB_RCCL ? N4P_DEV_ROCM : N4P_DEV_CUDA;
    self->dev_id = dev;
    return 0;
}

/* ------------------------------------------------------------ one call */

/* An op object that names the communicator it was made on (a CustomRedOp:
 * its int `_comm`) is refused on any other one: the library would run the
 * op that has the same id there. */
static int
check_op_owner(PyObject *mod, commobj *self, PyObject *o)
{
    PyObject *owner = PyObject_GetAttr(o, n4p_get_state(mod)->str_comm);
    if (owner == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    void *p = PyLong_Check(owner) ? PyLong_AsVoidPtr(owner) : NULL;
    Py_DECREF(owner);
    if (p == NULL && PyErr_Occurred())
        return -1;
    if (p == NULL || p == (void *)self->comm)
        return 0;
    n4p_comm_invalid(mod, "op was created on communicator %p, not on communicator %p it is used "
                     "with: a %.100s belongs to the communicator that made it (create it with "
                     "create_pre_mul_sum() of this one)", p, (void *)self->comm,
                     Py_TYPE(o)->tp_name);
    return -1;
}

/* A reduction op: NcclRedOp / int, or a CustomRedOp (its __index__).  Only
 * integers: a float such as 1.9 is a TypeError, never truncated. */
static int
get_op(PyObject *mod, commobj *self, PyObject *o, int *op)
{
    if (PyLong_Check(o) || (!PyFloat_Check(o) && PyIndex_Check(o))) {
        if (!PyLong_Check(o) && check_op_owner(mod, self, o) < 0)
            return -1;
        return n4p_arg_int(o, "op", op);
    }
    PyErr_Format(PyExc_TypeError, "op must be an NcclRedOp, a CustomRedOp or an int, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static int
get_rank(PyObject *mod, commobj *self, PyObject *o, const char *what, int *out)
{
    if (n4p_arg_int(o, what, out) < 0)
        return -1;
    if (*out < 0 || *out >= self->nranks) {
        n4p_comm_invalid(mod, "%s %d is out of range for a communicator of %d ranks", what, *out,
                         self->nranks);
        return -1;
    }
    return 0;
}

/* config=: the ncclCollConfig_t an NCCLCollConfig (or a low-level CollConfig)
 * stands for.  An NCCLCollConfig keeps the struct it made in _lowpp until one
 * of its fields changes (nccl.core.coll_config, whose materializer it
 * registered at import), so a config used again costs
 * one attribute lookup; j keeps the struct until the call returns (the
 * library reads it before that, also inside a group). */
static int
coll_config(PyObject *mod, PyObject *config, n4p_job *j)
{
    n4p_state *st = n4p_get_state(mod);
    void *p = n4p_struct_ptr(st, N4P_S_COLL_CONFIG, config);
    if (p != NULL) { /* a low-level CollConfig */
        j->config = Py_NewRef(config);
        j->call.config = p;
        return 0;
    }
    PyObject *low = PyObject_GetAttr(config, st->str_lowpp);
    if (low == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    }
    else if (low != Py_None && (p = n4p_struct_ptr(st, N4P_S_COLL_CONFIG, low)) != NULL) {
        j->config = low;
        j->call.config = p;
        return 0;
    }
    Py_XDECREF(low);
    PyObject *materialize = n4p_registered(st, &st->coll_config_materialize);
    if (materialize == NULL) { /* nccl.core.coll_config not imported: */
        PyErr_Format(PyExc_TypeError, /* no NCCLCollConfig exists */
                     "config must be an NCCLCollConfig or None, not %.100s",
                     Py_TYPE(config)->tp_name);
        return -1;
    }
    j->config = PyObject_CallOneArg(materialize, config);
    Py_DECREF(materialize);
    if (j->config == NULL)
        return -1;
    PyObject *cfg = j->config;
    if ((p = n4p_struct_ptr(st, N4P_S_COLL_CONFIG, cfg)) == NULL) { /* (cfg, ext nodes) */
        PyObject *ptr = PyObject_GetAttrString(cfg, "ptr");
        if (ptr == NULL)
            return -1;
        int rc = n4p_arg_ptr(ptr, "config", &p);
        Py_DECREF(ptr);
        if (rc < 0)
            return -1;
    }
    j->call.config = p;
    return 0;
}

/* The config in the layout the loaded library knows (NCCL 2.31's is shorter). */
static int
coll_config_for_library(PyObject *mod, n4p_job *j)
{
    void *p = (void *)j->call.config;
    if (n4p_struct_for_library(mod, N4P_S_COLL_CONFIG, 1, &p, &j->config_copy) < 0)
        return -1;
    j->call.config = p;
    return 0;
}

/* Parse the arguments by the method's keywords; convert op, root or peer,
 * and stream (the buffers are call_checks.c's). */
static int
parse_call(PyObject *mod, commobj *self, const coll_t *d, n4p_job *j, PyObject *const *args,
           Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs > d->positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)",
                     d->name, d->positional, nargs);
        return -1;
    }
    /* config=None alone is the plain call, parsed as one: the name from the
     * caller's code object is the interned "config" (any other spelling takes
     * the general path, with the same result) */
    if (kwnames != NULL && d->at[A_CONFIG] >= 0 && PyTuple_GET_SIZE(kwnames) == 1 &&
        args[nargs] == Py_None && PyTuple_GET_ITEM(kwnames, 0) == n4p_get_state(mod)->str_config)
        kwnames = NULL;
    if (n4p_parse_args(args, nargs, kwnames, d->name, d->kw, d->required, d->nargs, j->args) < 0)
        return -1;
    j->at = d->at;
    n4p_call *c = &j->call;
    c->op = c->root = -1;
    if (d->at[A_OP] >= 0) {
        if (get_op(mod, self, j->args[d->at[A_OP]], &c->op) < 0)
            return -1;
        n4p_trace_note_int(j->te, N4P_TF_REDOP, c->op);
    }
    if (d->rank_role != A_NONE) {
        PyObject *o = j->args[d->at[d->rank_role]];
        if ((d->rank_role != A_ROOT_ANY || (o != NULL && o != Py_None)) &&
            get_rank(mod, self, o, n4p_coll_keywords[d->rank_role], &c->root) < 0)
            return -1;
        if (c->root >= 0)
            n4p_trace_note_int(j->te, d->rank_role == A_PEER ? N4P_TF_PEER : N4P_TF_ROOT, c->root);
    }
    c->config = NULL;
    if (d->at[A_CONFIG] >= 0 && j->args[d->at[A_CONFIG]] != NULL &&
        j->args[d->at[A_CONFIG]] != Py_None &&
        (coll_config(mod, j->args[d->at[A_CONFIG]], j) < 0 || coll_config_for_library(mod, j) < 0))
        return -1;
    PyObject *o = c->stream_obj = j->args[d->at[A_STREAM]]; /* every call has a stream */
    void *s = NULL;
    if (o != NULL && n4p_stream_resolve(mod, o, &s) < 0)
        return -1;
    c->stream = (cudaStream_t)s;
    n4p_trace_note_stream(j->te, s);
    return 0;
}

/* The library call: every call of every method passes here. */
static ncclResult_t
run_call(const coll_t *d, const n4p_call *c, void *fn)
{
    ncclResult_t r;
    ncclDataType_t dt = (ncclDataType_t)c->dtype;
    ncclRedOp_t op = (ncclRedOp_t)c->op;
    switch (d->rule) {
    case R_SEND:
        CALL(((ncclSend_fn)fn)(c->send, c->count, dt, c->root, c->comm, c->stream));
        break;
    case R_RECV:
        CALL(((ncclRecv_fn)fn)(c->recv, c->count, dt, c->root, c->comm, c->stream));
        break;
    case R_BIAS:
        CALL(((ncclAllReduceWithBias_fn)fn)(c->send, c->recv, c->count, dt, op, c->comm,
                                            c->stream, c->bias));
        break;
    case R_ALLTOALLV:
        CALL(((ncclAllToAllv_fn)fn)(c->send, c->counts[0], c->counts[1], c->recv, c->counts[2],
                                    c->counts[3], dt, c->comm, c->stream));
        break;
    default: /* (send, recv, count, dtype, [op], [root], comm, stream, [config]) */
        if (c->config != NULL) {
            const ncclCollConfig_t *cfg = c->config;
            if (d->rule == R_REDUCE || d->rule == R_REDUCE_SCATTER) {
                if (c->root >= 0)
                    CALL(((ncclReduceConfig_fn)fn)(c->send, c->recv, c->count, dt, op, c->root,
                                                   c->comm, c->stream, cfg));
                else
                    CALL(((ncclAllReduceConfig_fn)fn)(c->send, c->recv, c->count, dt, op,
                                                      c->comm, c->stream, cfg));
            } else if (c->root >= 0) {
                CALL(((ncclBroadcastConfig_fn)fn)(c->send, c->recv, c->count, dt, c->root,
                                                  c->comm, c->stream, cfg));
            } else {
                CALL(((ncclAllGatherConfig_fn)fn)(c->send, c->recv, c->count, dt, c->comm,
                                                  c->stream, cfg));
            }
            break;
        }
        if (d->rule == R_REDUCE || d->rule == R_REDUCE_SCATTER) {
            if (c->root >= 0)
                CALL(((ncclReduce_fn)fn)(c->send, c->recv, c->count, dt, op, c->root, c->comm,
                                         c->stream));
            else
                CALL(((ncclAllReduce_fn)fn)(c->send, c->recv, c->count, dt, op, c->comm,
                                            c->stream));
        } else if (c->root >= 0) {
            CALL(((ncclBroadcast_fn)fn)(c->send, c->recv, c->count, dt, c->root, c->comm,
                                        c->stream));
        } else {
            CALL(((ncclAllGather_fn)fn)(c->send, c->recv, c->count, dt, c->comm, c->stream));
        }
        break;
    }
    return r;
}

/* A method of the table: parse, check, run, clean up, between the guard's
 * enter and leave. */
static PyObject *
call_method(commobj *self, PyTypeObject *cls, int which, PyObject *const *args,
            Py_ssize_t nargs, PyObject *kwnames)
{
    const coll_t *d = &colls[which];
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL || n4p_comm_enter(mod, self, d->name) < 0)
        return NULL;
    n4p_job j;
    j.rule = d->rule;
    j.resolved = 0;
    j.config = NULL;
    n4p_call *c = &j.call;
    c->bias = NULL;
    c->count = 0;
    memset(j.counts, 0, sizeof j.counts);
    c->counts = d->rule == R_ALLTOALLV ? j.counts : NULL;
    PyObject *res = NULL;
    n4p_trace_entry *outer = n4p_trace_cur, *te = NULL; /* the flight recorder (trace.h) */
    if (ensure_info(mod, self) < 0 ||
        n4p_trace_begin(mod, &self->trace, &self->owner, self->comm, self->rank,
                        self->nranks, d->name, d->rank_role == A_PEER, &te) < 0) {
        n4p_comm_leave(self);
        return NULL;
    }
    j.te = te;
    if (parse_call(mod, self, d, &j, args, nargs, kwnames) < 0)
        goto out;
    c->method = d->name;
    if (c->config != NULL)
        c->fn = c->root < 0 ? d->fn_all_cfg : d->fn_cfg;
    else
        c->fn = c->root < 0 ? d->fn_all : d->fn;
    c->comm = self->comm;
    void *fn = n4p_fn(mod, c->fn);
    if (fn == NULL || n4p_check_buffers(mod, self, &j) < 0)
        goto out;
    ncclResult_t r = run_call(d, c, fn);
    n4p_trace_note_status(te, r);
    if (n4p_group_depth() > 0)
        n4p_comm_keep_queued(self, c->stream_obj, j.buf, j.resolved);
    res = n4p_status_none(mod, r);
out:
    for (int i = 0; j.resolved >> i; i++)
        if (j.resolved >> i & 1u)
            n4p_buffer_release(&j.buf[i]);
    if (c->counts != NULL)
        for (int i = 0; i < 4; i++)
            PyMem_Free(j.counts[i]);
    Py_XDECREF(j.config);
    res = n4p_trace_end(mod, self->trace, te, outer, res, &N4P_HANDLE(self));
    n4p_comm_leave(self);
    return res;
}

#define METHOD_ARGS \
    commobj *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames
#define N4P_COLL(method, RULE, fn, fn_all, required, positional, roles) \
    static PyObject *m_##method(METHOD_ARGS)                            \
    {                                                                   \
        return call_method(self, cls, C_##method, args, nargs, kwnames); \
    }
#include "collectives.def"

/* ------------------------------------------------------------ the type */

static PyObject *
cb_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    PyObject *o = PyType_GenericNew(tp, args, kwds);
    if (o != NULL)
        n4p_slot_init(&((commobj *)o)->handle, NULL);
    return o;
}

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
    n4p_comm_set(self, (ncclComm_t)p);
    self->pid = n4p_comm_pid();
    n4p_comm_reset_cache(self);
    return 0;
}

static PyObject *
cb_get_ptr(commobj *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(n4p_slot_get(&self->handle));
}

static PyObject *
cb_get_address(commobj *self, void *Py_UNUSED(c))
{
    return n4p_slot_address(&self->handle);
}

static PyObject *
cb_get_is_valid(commobj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(n4p_slot_get(&self->handle) != NULL);
}

static PyObject *
cb_set_ptr(commobj *self, PyObject *v)
{
    void *p = NULL;
    if (v != Py_None && n4p_arg_ptr(v, "ptr", &p) < 0)
        return NULL;
    n4p_comm_set(self, (ncclComm_t)p);
    self->pid = n4p_comm_pid(); /* made (or adopted) by this process */
    n4p_comm_reset_cache(self);
    Py_RETURN_NONE;
}

static PyObject *
cb_info(commobj *self, PyTypeObject *cls, PyObject *const *Py_UNUSED(args),
        Py_ssize_t Py_UNUSED(nargs), PyObject *Py_UNUSED(kwnames))
{
    PyObject *mod = PyType_GetModule(cls);
    if (mod == NULL || n4p_comm_check_valid(mod, self, "query the communicator") < 0 ||
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
    n4p_slot_release(&self->handle);
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
    if (mod == NULL)
        return NULL;
    /* the abort flag is cleared: see communicator.h */
    N4P_FT_STORE(&self->comm, (ncclComm_t)n4p_slot_get(&self->handle));
    return n4p_trace_setup(mod, &self->trace, &self->owner, self->comm, args, nargs, kwnames);
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

static PyMethodDef cb_methods[] = {
#define N4P_COLL(method, RULE, fn, fn_all, required, positional, roles) \
    {#method, (PyCFunction)(void (*)(void))m_##method, N4P_METH_METHOD, N4P_DOC_##method},
#include "collectives.def"
    {"_info", (PyCFunction)(void (*)(void))cb_info, N4P_METH_METHOD,
     "_info($self, /)\n--\n\n(nranks, rank, DLPack device type, device id), queried once and "
     "cached."},
    {"_set_ptr", (PyCFunction)cb_set_ptr, METH_O,
     "_set_ptr($self, ptr, /)\n--\n\nReplace the handle (made or adopted by this process) and "
     "forget cached info."},
    {"_trace_setup", (PyCFunction)(void (*)(void))cb_trace_setup, N4P_METH_METHOD,
     "_trace_setup($self, /, timeout=None, comm_hash=None, rank=None, nranks=None)\n--\n\n"
     "Watchdog timeout (seconds, 0: off; None: NCCL4PY_WATCHDOG_TIMEOUT), hash, rank and size "
     "of the communicator for its flight record."},
    {"dump_trace", (PyCFunction)(void (*)(void))cb_dump_trace, N4P_METH_METHOD,
     "dump_trace($self, /, path=None)\n--\n\n"
     "Write this communicator's flight record (JSON) to path, or to "
     "NCCL4PY_TRACE_DIR/rank<R>.json; returns the path."},
    N4P_COMM_GUARD_METHODDEFS,
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cb_getset[] = {
    {"ptr", (getter)cb_get_ptr, NULL, "the ncclComm_t handle as an int (0 when null)", NULL},
    {"is_valid", (getter)cb_get_is_valid, NULL, "True unless the communicator is null", NULL},
    {"_comm_address", (getter)cb_get_address, NULL,
     "address of the handle slot (out-parameter for the library; it stays valid while the "
     "library may still write it, see src/slot.c)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot cb_slots[] = {
    {Py_tp_doc, "C base of nccl.core.Communicator."},
    {Py_tp_new, cb_new},
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
    (void)pthread_once(&once, init_table);
    (void)n4p_comm_pid();
    PyObject *tp = PyType_FromModuleAndSpec(mod, &cb_spec, NULL);
    if (tp == NULL)
        return -1;
    st->comm_base_type = (PyTypeObject *)tp;
    st->str_config = PyUnicode_InternFromString("config");
    st->str_comm = PyUnicode_InternFromString("_comm");
    if (st->str_config == NULL || st->str_comm == NULL)
        return -1;
    return PyModule_AddObjectRef(mod, "_CommunicatorBase", tp);
}
