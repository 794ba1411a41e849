/*
 * wrappers.c - the hand-written low-level wrappers: functions with
 * out-parameters, structs, arrays, or the two calling conventions.
 *
 * Two conventions are accepted for every function that creates a handle;
 * they differ in arity, so the number of arguments picks one:
 *   nccl4py 0.2 (seed):  comm = comm_init_rank(nranks, uid, rank)
 *   nccl4py 0.3:         status = comm_init_rank(box.address, nranks, uid, rank)
 * In the 0.3 form the library writes the handle into the caller's storage
 * (so a non-blocking init can complete later) and the status (0 or
 * InProgress) is returned.
 *
 * Every wrapper first checks that the library has the symbol (raising
 * FunctionNotFoundError before any argument is converted), then converts,
 * then calls with the GIL released.
 */
#include "bindings.h"

#include <string.h>

#define PARSE(fname, kwlist, minn, maxn, arr)                                                  \
    do {                                                                                       \
        if (n4p_parse_args(args, nargs, kwnames, fname, kwlist, minn, maxn, arr) < 0)          \
            return NULL;                                                                       \
    } while (0)

#define GETFN(sym)                                                                             \
    sym##_fn fn = (sym##_fn)n4p_fn(mod, N4P_IDX_##sym);                                        \
    if (fn == NULL)                                                                            \
        return NULL

#define FASTCALL_ARGS PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

/* Result of a handle-creating call in either convention. */
static PyObject *
handle_result(PyObject *mod, ncclResult_t r, int caller_storage, void *handle)
{
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    if (caller_storage)
        return PyLong_FromLong((long)r);
    return PyLong_FromVoidPtr(handle);
}

static PyObject *
int_result(PyObject *mod, ncclResult_t r, long long v)
{
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    return PyLong_FromLongLong(v);
}

static PyObject *
str_result(const char *s)
{
    if (s == NULL)
        return PyUnicode_FromString("");
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* A unique id passed by value: a 128-byte buffer or an int address. */
static int
arg_uid(PyObject *o, const char *name, ncclUniqueId *out)
{
    n4p_bytes_arg b;
    if (n4p_arg_bytes(o, name, NCCL_UNIQUE_ID_BYTES, 0, &b) < 0)
        return -1;
    if (b.have_view && b.view.len != NCCL_UNIQUE_ID_BYTES) {
        n4p_bytes_release(&b);
        PyErr_Format(PyExc_ValueError, "%s must be exactly %d bytes", name, NCCL_UNIQUE_ID_BYTES);
        return -1;
    }
    memcpy(out, b.ptr, sizeof *out);
    n4p_bytes_release(&b);
    return 0;
}

/* Several unique ids: a list/tuple of 128-byte buffers, or one buffer / an
 * address holding n of them.  *out is PyMem-allocated (always a copy). */
static int
arg_uid_array(PyObject *o, const char *name, int n, ncclUniqueId **out)
{
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "the number of ids for %s must be >= 0", name);
        return -1;
    }
    ncclUniqueId *ids = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ids);
    if (ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) {
        if (PySequence_Fast_GET_SIZE(o) != n) {
            PyErr_Format(PyExc_ValueError, "%s holds %zd ids but n_id is %d", name,
                         PySequence_Fast_GET_SIZE(o), n);
            goto fail;
        }
        for (int i = 0; i < n; i++)
            if (arg_uid(PySequence_Fast_GET_ITEM(o, i), name, &ids[i]) < 0)
                goto fail;
    } else {
        n4p_bytes_arg b;
        if (n4p_arg_bytes(o, name, (Py_ssize_t)n * NCCL_UNIQUE_ID_BYTES, 0, &b) < 0)
            goto fail;
        memcpy(ids, b.ptr, (size_t)n * sizeof *ids);
        n4p_bytes_release(&b);
    }
    *out = ids;
    return 0;
fail:
    PyMem_Free(ids);
    return -1;
}

/* --------------------------------------------------------------- basics */

static PyObject *
w_get_version(FASTCALL_ARGS)
{
    PARSE("get_version", NULL, 0, 0, NULL);
    GETFN(ncclGetVersion);
    int v = 0;
    ncclResult_t r;
    CALL(fn(&v));
    return int_result(mod, r, v);
}

static PyObject *
w_get_unique_id(FASTCALL_ARGS)
{
    static const char *const kw[] = {"unique_id", NULL};
    PyObject *a[1];
    PARSE("get_unique_id", kw, 0, 1, a);
    GETFN(ncclGetUniqueId);
    ncclResult_t r;
    if (a[0] == NULL) {
        n4p_state *st = n4p_get_state(mod);
        PyObject *uid = n4p_struct_new(st, N4P_S_UNIQUE_ID);
        if (uid == NULL)
            return NULL;
        ncclUniqueId *p = n4p_struct_ptr(st, N4P_S_UNIQUE_ID, uid);
        CALL(fn(p));
        if (n4p_status_failed(r)) {
            Py_DECREF(uid);
            return n4p_raise_status(mod, r);
        }
        return uid;
    }
    n4p_bytes_arg b;
    if (n4p_arg_bytes(a[0], "unique_id", NCCL_UNIQUE_ID_BYTES, 1, &b) < 0)
        return NULL;
    CALL(fn((ncclUniqueId *)b.ptr));
    n4p_bytes_release(&b);
    return n4p_status_none(mod, r);
}

static PyObject *
w_get_error_string(FASTCALL_ARGS)
{
    static const char *const kw[] = {"result", NULL};
    PyObject *a[1];
    PARSE("get_error_string", kw, 1, 1, a);
    GETFN(ncclGetErrorString);
    int v;
    if (n4p_arg_int(a[0], "result", &v) < 0)
        return NULL;
    const char *s;
    Py_BEGIN_ALLOW_THREADS
    s = fn((ncclResult_t)v);
    Py_END_ALLOW_THREADS
    return str_result(s);
}

static PyObject *
w_get_last_error(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", NULL};
    PyObject *a[1];
    PARSE("get_last_error", kw, 1, 1, a);
    GETFN(ncclGetLastError);
    void *comm;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0)
        return NULL;
    const char *s;
    Py_BEGIN_ALLOW_THREADS
    s = fn((ncclComm_t)comm);
    Py_END_ALLOW_THREADS
    return str_result(s);
}

static PyObject *
w_mem_alloc(FASTCALL_ARGS)
{
    static const char *const kw[] = {"size", NULL};
    PyObject *a[1];
    PARSE("mem_alloc", kw, 1, 1, a);
    GETFN(ncclMemAlloc);
    size_t size;
    if (n4p_arg_size(a[0], "size", &size) < 0)
        return NULL;
    void *p = NULL;
    ncclResult_t r;
    CALL(fn(&p, size));
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    return PyLong_FromVoidPtr(p);
}

/* ------------------------------------------------------- communicators */

static PyObject *
w_comm_init_rank(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "nranks", "comm_id", "rank", NULL};
    static const char *const kw2[] = {"nranks", "comm_id", "rank", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 4;
    PyObject *a[4];
    if (caller)
        PARSE("comm_init_rank", kw3, 4, 4, a);
    else
        PARSE("comm_init_rank", kw2, 3, 3, a + 1);
    GETFN(ncclCommInitRank);
    void *out = NULL, *local = NULL;
    int nranks, rank;
    ncclUniqueId uid;
    if ((caller && n4p_arg_out_ptr(a[0], "comm", &out) < 0) ||
        n4p_arg_int(a[1], "nranks", &nranks) < 0 || arg_uid(a[2], "comm_id", &uid) < 0 ||
        n4p_arg_int(a[3], "rank", &rank) < 0)
        return NULL;
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn(dst, nranks, uid, rank));
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_init_rank_config(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "nranks", "comm_id", "rank", "config", NULL};
    static const char *const kw2[] = {"nranks", "comm_id", "rank", "config", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 5;
    PyObject *a[5];
    if (caller)
        PARSE("comm_init_rank_config", kw3, 5, 5, a);
    else
        PARSE("comm_init_rank_config", kw2, 4, 4, a + 1);
    GETFN(ncclCommInitRankConfig);
    n4p_state *st = n4p_get_state(mod);
    void *out = NULL, *local = NULL, *config;
    int nranks, rank;
    ncclUniqueId uid;
    if ((caller && n4p_arg_out_ptr(a[0], "comm", &out) < 0) ||
        n4p_arg_int(a[1], "nranks", &nranks) < 0 || arg_uid(a[2], "comm_id", &uid) < 0 ||
        n4p_arg_int(a[3], "rank", &rank) < 0 ||
        n4p_arg_struct(st, N4P_S_CONFIG, a[4], "config", 1, &config) < 0)
        return NULL;
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn(dst, nranks, uid, rank, (ncclConfig_t *)config));
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_init_rank_scalable(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"newcomm", "nranks", "myrank", "n_id", "comm_ids", "config", NULL};
    static const char *const kw2[] = {"nranks", "myrank", "n_id", "comm_ids", "config", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 6;
    PyObject *a[6];
    if (caller)
        PARSE("comm_init_rank_scalable", kw3, 6, 6, a);
    else
        PARSE("comm_init_rank_scalable", kw2, 5, 5, a + 1);
    GETFN(ncclCommInitRankScalable);
    n4p_state *st = n4p_get_state(mod);
    void *out = NULL, *local = NULL, *config;
    int nranks, myrank, nid;
    if ((caller && n4p_arg_out_ptr(a[0], "newcomm", &out) < 0) ||
        n4p_arg_int(a[1], "nranks", &nranks) < 0 || n4p_arg_int(a[2], "myrank", &myrank) < 0 ||
        n4p_arg_int(a[3], "n_id", &nid) < 0 ||
        n4p_arg_struct(st, N4P_S_CONFIG, a[5], "config", 1, &config) < 0)
        return NULL;
    ncclUniqueId *ids;
    if (arg_uid_array(a[4], "comm_ids", nid, &ids) < 0)
        return NULL;
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn(dst, nranks, myrank, nid, ids, (ncclConfig_t *)config));
    PyMem_Free(ids);
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_init_all(FASTCALL_ARGS)
{
    static const char *const kw[] = {"ndev", "devlist", NULL};
    PyObject *a[2];
    PARSE("comm_init_all", kw, 1, 2, a);
    GETFN(ncclCommInitAll);
    int ndev, *devs, owned;
    Py_ssize_t len;
    if (n4p_arg_int(a[0], "ndev", &ndev) < 0)
        return NULL;
    if (ndev < 0) {
        PyErr_SetString(PyExc_ValueError, "ndev must be >= 0");
        return NULL;
    }
    if (n4p_arg_int_array(a[1] ? a[1] : Py_None, "devlist", &devs, &len, &owned) < 0)
        return NULL;
    if (owned && len != ndev) {
        PyMem_Free(devs);
        PyErr_Format(PyExc_ValueError, "devlist has %zd entries but ndev is %d", len, ndev);
        return NULL;
    }
    if (ndev == 0) {
        if (owned)
            PyMem_Free(devs);
        return PyList_New(0);
    }
    /* an array of ncclComm_t handles (pointers), so sizeof of a pointer is meant */
    ncclComm_t *comms = PyMem_Calloc((size_t)ndev, sizeof *comms); /* NOLINT(bugprone-sizeof-expression) */
    if (comms == NULL) {
        if (owned)
            PyMem_Free(devs);
        return PyErr_NoMemory();
    }
    ncclResult_t r;
    CALL(fn(comms, ndev, devs));
    if (owned)
        PyMem_Free(devs);
    PyObject *res = NULL;
    if (n4p_status_failed(r)) {
        n4p_raise_status(mod, r);
    } else if ((res = PyList_New(ndev)) != NULL) {
        for (int i = 0; i < ndev; i++) {
            PyObject *h = PyLong_FromVoidPtr(comms[i]);
            if (h == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, i, h);
        }
    }
    PyMem_Free(comms);
    return res;
}

static PyObject *
w_comm_split(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "color", "key", "newcomm", "config", NULL};
    static const char *const kw2[] = {"comm", "color", "key", "config", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 5;
    PyObject *a[5], *b[4];
    if (caller) {
        PARSE("comm_split", kw3, 5, 5, a);
    } else {
        PARSE("comm_split", kw2, 4, 4, b);
        a[0] = b[0], a[1] = b[1], a[2] = b[2], a[3] = NULL, a[4] = b[3];
    }
    GETFN(ncclCommSplit);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *out = NULL, *local = NULL, *config;
    int color, key;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_int(a[1], "color", &color) < 0 ||
        n4p_arg_int(a[2], "key", &key) < 0 ||
        (caller && n4p_arg_out_ptr(a[3], "newcomm", &out) < 0) ||
        n4p_arg_struct(st, N4P_S_CONFIG, a[4], "config", 1, &config) < 0)
        return NULL;
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, color, key, dst, (ncclConfig_t *)config));
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_shrink(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "exclude_ranks_list", "exclude_ranks_count",
                                      "newcomm", "config", "shrink_flags", NULL};
    static const char *const kw2[] = {"comm", "exclude_ranks_list", "exclude_ranks_count",
                                      "config", "shrink_flags", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 6;
    PyObject *a[6], *b[5];
    if (caller) {
        PARSE("comm_shrink", kw3, 6, 6, a);
    } else {
        PARSE("comm_shrink", kw2, 5, 5, b);
        a[0] = b[0], a[1] = b[1], a[2] = b[2], a[3] = NULL, a[4] = b[3], a[5] = b[4];
    }
    GETFN(ncclCommShrink);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *out = NULL, *local = NULL, *config;
    int count, flags;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 ||
        n4p_arg_int(a[2], "exclude_ranks_count", &count) < 0 ||
        (caller && n4p_arg_out_ptr(a[3], "newcomm", &out) < 0) ||
        n4p_arg_struct(st, N4P_S_CONFIG, a[4], "config", 1, &config) < 0 ||
        n4p_arg_int(a[5], "shrink_flags", &flags) < 0)
        return NULL;
    int *ranks, owned;
    Py_ssize_t len;
    if (n4p_arg_int_array(a[1], "exclude_ranks_list", &ranks, &len, &owned) < 0)
        return NULL;
    if (owned && len != count) {
        PyMem_Free(ranks);
        PyErr_Format(PyExc_ValueError,
                     "exclude_ranks_list has %zd entries but exclude_ranks_count is %d", len, count);
        return NULL;
    }
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, ranks, count, dst, (ncclConfig_t *)config, flags));
    if (owned)
        PyMem_Free(ranks);
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_get_unique_id(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "unique_id", NULL};
    PyObject *a[2];
    PARSE("comm_get_unique_id", kw, 1, 2, a);
    GETFN(ncclCommGetUniqueId);
    void *comm;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0)
        return NULL;
    ncclResult_t r;
    if (a[1] == NULL) {
        n4p_state *st = n4p_get_state(mod);
        PyObject *uid = n4p_struct_new(st, N4P_S_UNIQUE_ID);
        if (uid == NULL)
            return NULL;
        CALL(fn((ncclComm_t)comm, n4p_struct_ptr(st, N4P_S_UNIQUE_ID, uid)));
        if (n4p_status_failed(r)) {
            Py_DECREF(uid);
            return n4p_raise_status(mod, r);
        }
        return uid;
    }
    n4p_bytes_arg b;
    if (n4p_arg_bytes(a[1], "unique_id", NCCL_UNIQUE_ID_BYTES, 1, &b) < 0)
        return NULL;
    CALL(fn((ncclComm_t)comm, (ncclUniqueId *)b.ptr));
    n4p_bytes_release(&b);
    return n4p_status_none(mod, r);
}

static PyObject *
w_comm_grow(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "n_ranks", "unique_id", "rank", "newcomm", "config", NULL};
    static const char *const kw2[] = {"comm", "n_ranks", "unique_id", "rank", "config", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 6;
    PyObject *a[6], *b[5];
    if (caller) {
        PARSE("comm_grow", kw3, 6, 6, a);
    } else {
        PARSE("comm_grow", kw2, 5, 5, b);
        a[0] = b[0], a[1] = b[1], a[2] = b[2], a[3] = b[3], a[4] = NULL, a[5] = b[4];
    }
    GETFN(ncclCommGrow);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *out = NULL, *local = NULL, *config, *uidp = NULL;
    int n, rank;
    ncclUniqueId uid;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_int(a[1], "n_ranks", &n) < 0 ||
        n4p_arg_int(a[3], "rank", &rank) < 0 ||
        (caller && n4p_arg_out_ptr(a[4], "newcomm", &out) < 0) ||
        n4p_arg_struct(st, N4P_S_CONFIG, a[5], "config", 1, &config) < 0)
        return NULL;
    /* existing ranks may pass no id: None or 0 give NULL */
    if (a[2] != Py_None) {
        if (PyLong_Check(a[2])) {
            if (n4p_arg_ptr(a[2], "unique_id", &uidp) < 0)
                return NULL;
        } else {
            if (arg_uid(a[2], "unique_id", &uid) < 0)
                return NULL;
            uidp = &uid;
        }
    }
    ncclComm_t *dst = caller ? (ncclComm_t *)out : (ncclComm_t *)&local;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, n, (const ncclUniqueId *)uidp, rank, dst, (ncclConfig_t *)config));
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_comm_mem_stats(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "stat", NULL};
    PyObject *a[2];
    PARSE("comm_mem_stats", kw, 2, 2, a);
    GETFN(ncclCommMemStats);
    void *comm;
    int stat;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_int(a[1], "stat", &stat) < 0)
        return NULL;
    uint64_t v = 0;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, (ncclCommMemStat_t)stat, &v));
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    return PyLong_FromUnsignedLongLong(v);
}

static PyObject *
w_comm_get_async_error(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", NULL};
    PyObject *a[1];
    PARSE("comm_get_async_error", kw, 1, 1, a);
    GETFN(ncclCommGetAsyncError);
    void *comm;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0)
        return NULL;
    ncclResult_t v = ncclSuccess, r;
    CALL(fn((ncclComm_t)comm, &v));
    return int_result(mod, r, v);
}

/* comm_count, comm_cu_device, comm_user_rank share this body. */
typedef ncclResult_t (*comm_int_fn)(ncclComm_t, int *);
static PyObject *
comm_int_query(FASTCALL_ARGS, const char *fname, int idx)
{
    static const char *const kw[] = {"comm", NULL};
    PyObject *a[1];
    PARSE(fname, kw, 1, 1, a);
    comm_int_fn fn = (comm_int_fn)n4p_fn(mod, idx);
    if (fn == NULL)
        return NULL;
    void *comm;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0)
        return NULL;
    int v = 0;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, &v));
    return int_result(mod, r, v);
}

static PyObject *
w_comm_count(FASTCALL_ARGS)
{
    return comm_int_query(mod, args, nargs, kwnames, "comm_count", N4P_IDX_ncclCommCount);
}

static PyObject *
w_comm_cu_device(FASTCALL_ARGS)
{
    return comm_int_query(mod, args, nargs, kwnames, "comm_cu_device", N4P_IDX_ncclCommCuDevice);
}

static PyObject *
w_comm_user_rank(FASTCALL_ARGS)
{
    return comm_int_query(mod, args, nargs, kwnames, "comm_user_rank", N4P_IDX_ncclCommUserRank);
}

static PyObject *
w_comm_query_properties(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "props", NULL};
    PyObject *a[2];
    PARSE("comm_query_properties", kw, 1, 2, a);
    GETFN(ncclCommQueryProperties);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *props;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0)
        return NULL;
    ncclResult_t r;
    if (a[1] == NULL) {
        PyObject *obj = n4p_struct_new(st, N4P_S_COMM_PROPERTIES);
        if (obj == NULL)
            return NULL;
        props = n4p_struct_ptr(st, N4P_S_COMM_PROPERTIES, obj);
        CALL(fn((ncclComm_t)comm, (ncclCommProperties_t *)props));
        if (n4p_status_failed(r)) {
            Py_DECREF(obj);
            return n4p_raise_status(mod, r);
        }
        return obj;
    }
    if (n4p_arg_struct(st, N4P_S_COMM_PROPERTIES, a[1], "props", 0, &props) < 0)
        return NULL;
    CALL(fn((ncclComm_t)comm, (ncclCommProperties_t *)props));
    return n4p_status_none(mod, r);
}

/* ------------------------------------------------------- registration */

static PyObject *
w_comm_register(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "buff", "size", NULL};
    PyObject *a[3];
    PARSE("comm_register", kw, 3, 3, a);
    GETFN(ncclCommRegister);
    void *comm, *buff, *handle = NULL;
    size_t size;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_ptr(a[1], "buff", &buff) < 0 ||
        n4p_arg_size(a[2], "size", &size) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, buff, size, &handle));
    return handle_result(mod, r, 0, handle);
}

static PyObject *
w_comm_window_register(FASTCALL_ARGS)
{
    static const char *const kw3[] = {"comm", "buff", "size", "win", "win_flags", NULL};
    static const char *const kw2[] = {"comm", "buff", "size", "win_flags", NULL};
    int caller = n4p_nargs_total(nargs, kwnames) == 5;
    PyObject *a[5], *b[4];
    if (caller) {
        PARSE("comm_window_register", kw3, 5, 5, a);
    } else {
        PARSE("comm_window_register", kw2, 4, 4, b);
        a[0] = b[0], a[1] = b[1], a[2] = b[2], a[3] = NULL, a[4] = b[3];
    }
    GETFN(ncclCommWindowRegister);
    void *comm, *buff, *out = NULL, *local = NULL;
    size_t size;
    int flags;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_ptr(a[1], "buff", &buff) < 0 ||
        n4p_arg_size(a[2], "size", &size) < 0 ||
        (caller && n4p_arg_out_ptr(a[3], "win", &out) < 0) ||
        n4p_arg_int(a[4], "win_flags", &flags) < 0)
        return NULL;
    ncclWindow_t *dst = caller ? (ncclWindow_t *)out : (ncclWindow_t *)&local;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, buff, size, dst, flags));
    return handle_result(mod, r, caller, local);
}

static PyObject *
w_win_get_user_ptr(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "win", NULL};
    PyObject *a[2];
    PARSE("win_get_user_ptr", kw, 2, 2, a);
    GETFN(ncclWinGetUserPtr);
    void *comm, *win, *p = NULL;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 || n4p_arg_ptr(a[1], "win", &win) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, (ncclWindow_t)win, &p));
    return handle_result(mod, r, 0, p);
}

static PyObject *
w_red_op_create_pre_mul_sum(FASTCALL_ARGS)
{
    static const char *const kw[] = {"scalar", "datatype", "residence", "comm", NULL};
    PyObject *a[4];
    PARSE("red_op_create_pre_mul_sum", kw, 4, 4, a);
    GETFN(ncclRedOpCreatePreMulSum);
    void *scalar, *comm;
    int dtype, residence;
    if (n4p_arg_ptr(a[0], "scalar", &scalar) < 0 || n4p_arg_int(a[1], "datatype", &dtype) < 0 ||
        n4p_arg_int(a[2], "residence", &residence) < 0 || n4p_arg_ptr(a[3], "comm", &comm) < 0)
        return NULL;
    ncclRedOp_t op = ncclSum;
    ncclResult_t r;
    CALL(fn(&op, scalar, (ncclDataType_t)dtype, (ncclScalarResidence_t)residence, (ncclComm_t)comm));
    return int_result(mod, r, op);
}

/* ------------------------------------------------------------ signals */

static PyObject *
w_wait_signal(FASTCALL_ARGS)
{
    static const char *const kw[] = {"n_desc", "signal_descs", "comm", "stream", NULL};
    PyObject *a[4];
    PARSE("wait_signal", kw, 4, 4, a);
    GETFN(ncclWaitSignal);
    n4p_state *st = n4p_get_state(mod);
    int n;
    void *comm, *stream;
    if (n4p_arg_int(a[0], "n_desc", &n) < 0 || n4p_arg_ptr(a[2], "comm", &comm) < 0 ||
        n4p_arg_ptr(a[3], "stream", &stream) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n_desc must be >= 0");
        return NULL;
    }
    ncclWaitSignalDesc_t *descs = NULL;
    n4p_bytes_arg b = {0};
    if (PyList_Check(a[1]) || PyTuple_Check(a[1])) {
        if (PySequence_Fast_GET_SIZE(a[1]) != n) {
            PyErr_Format(PyExc_ValueError, "signal_descs holds %zd descriptors but n_desc is %d",
                         PySequence_Fast_GET_SIZE(a[1]), n);
            return NULL;
        }
        descs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *descs);
        if (descs == NULL)
            return PyErr_NoMemory();
        for (int i = 0; i < n; i++) {
            void *p = n4p_struct_ptr(st, N4P_S_WAIT_SIGNAL_DESC, PySequence_Fast_GET_ITEM(a[1], i));
            if (p == NULL) {
                PyMem_Free(descs);
                PyErr_SetString(PyExc_TypeError, "signal_descs items must be WaitSignalDesc");
                return NULL;
            }
            memcpy(&descs[i], p, sizeof *descs);
        }
    } else if (n4p_arg_bytes(a[1], "signal_descs", (Py_ssize_t)n * (Py_ssize_t)sizeof *descs, 0,
                             &b) < 0) {
        return NULL;
    }
    ncclWaitSignalDesc_t *p = descs ? descs : (ncclWaitSignalDesc_t *)b.ptr;
    ncclResult_t r;
    CALL(fn(n, p, (ncclComm_t)comm, (cudaStream_t)stream));
    PyMem_Free(descs);
    n4p_bytes_release(&b);
    return n4p_status_none(mod, r);
}

/* --------------------------------------------------- device communicators */

static PyObject *
w_dev_comm_create(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "reqs", "out_dev_comm", NULL};
    PyObject *a[3];
    PARSE("dev_comm_create", kw, 2, 3, a);
    GETFN(ncclDevCommCreate);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *reqs, *out;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 ||
        n4p_arg_struct(st, N4P_S_DEV_COMM_REQUIREMENTS, a[1], "reqs", 0, &reqs) < 0)
        return NULL;
    PyObject *obj = NULL;
    if (a[2] == NULL) {
        obj = n4p_struct_new(st, N4P_S_DEV_COMM);
        if (obj == NULL)
            return NULL;
        out = n4p_struct_ptr(st, N4P_S_DEV_COMM, obj);
    } else if (n4p_arg_struct(st, N4P_S_DEV_COMM, a[2], "out_dev_comm", 0, &out) < 0) {
        return NULL;
    }
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, (const ncclDevCommRequirements_t *)reqs, (ncclDevComm_t *)out));
    if (n4p_status_failed(r)) {
        Py_XDECREF(obj);
        return n4p_raise_status(mod, r);
    }
    return obj ? obj : Py_NewRef(Py_None);
}

static PyObject *
w_dev_comm_destroy(FASTCALL_ARGS)
{
    static const char *const kw[] = {"comm", "dev_comm", NULL};
    PyObject *a[2];
    PARSE("dev_comm_destroy", kw, 2, 2, a);
    GETFN(ncclDevCommDestroy);
    n4p_state *st = n4p_get_state(mod);
    void *comm, *dc;
    if (n4p_arg_ptr(a[0], "comm", &comm) < 0 ||
        n4p_arg_struct(st, N4P_S_DEV_COMM, a[1], "dev_comm", 0, &dc) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn((ncclComm_t)comm, (const ncclDevComm_t *)dc));
    return n4p_status_none(mod, r);
}

static PyObject *
w_get_lsa_multimem_device_pointer(FASTCALL_ARGS)
{
    static const char *const kw[] = {"window", "offset", NULL};
    PyObject *a[2];
    PARSE("get_lsa_multimem_device_pointer", kw, 2, 2, a);
    GETFN(ncclGetLsaMultimemDevicePointer);
    void *win, *p = NULL;
    size_t off;
    if (n4p_arg_ptr(a[0], "window", &win) < 0 || n4p_arg_size(a[1], "offset", &off) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn((ncclWindow_t)win, off, &p));
    return handle_result(mod, r, 0, p);
}

/* get_lsa_device_pointer and get_peer_device_pointer share this body. */
typedef ncclResult_t (*win_rank_fn)(ncclWindow_t, size_t, int, void **);
static PyObject *
window_rank_pointer(FASTCALL_ARGS, const char *fname, const char *rank_name, int idx)
{
    const char *const kw[] = {"window", "offset", rank_name, NULL};
    PyObject *a[3];
    PARSE(fname, kw, 3, 3, a);
    win_rank_fn fn = (win_rank_fn)n4p_fn(mod, idx);
    if (fn == NULL)
        return NULL;
    void *win, *p = NULL;
    size_t off;
    int rank;
    if (n4p_arg_ptr(a[0], "window", &win) < 0 || n4p_arg_size(a[1], "offset", &off) < 0 ||
        n4p_arg_int(a[2], rank_name, &rank) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn((ncclWindow_t)win, off, rank, &p));
    return handle_result(mod, r, 0, p);
}

static PyObject *
w_get_lsa_device_pointer(FASTCALL_ARGS)
{
    return window_rank_pointer(mod, args, nargs, kwnames, "get_lsa_device_pointer", "lsa_rank",
                               N4P_IDX_ncclGetLsaDevicePointer);
}

static PyObject *
w_get_peer_device_pointer(FASTCALL_ARGS)
{
    return window_rank_pointer(mod, args, nargs, kwnames, "get_peer_device_pointer", "peer",
                               N4P_IDX_ncclGetPeerDevicePointer);
}

/* ------------------------------------------------------------ RCCL extras */

static PyObject *
w_all_to_all_v(FASTCALL_ARGS)
{
    static const char *const kw[] = {"sendbuff", "sendcounts", "sdispls", "recvbuff",
                                     "recvcounts", "rdispls", "datatype", "comm", "stream", NULL};
    static const char *const arr_names[] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
    PyObject *a[9];
    PARSE("all_to_all_v", kw, 9, 9, a);
    GETFN(ncclAllToAllv);
    void *send, *recv, *comm, *stream;
    int dtype;
    if (n4p_arg_ptr(a[0], "sendbuff", &send) < 0 || n4p_arg_ptr(a[3], "recvbuff", &recv) < 0 ||
        n4p_arg_int(a[6], "datatype", &dtype) < 0 || n4p_arg_ptr(a[7], "comm", &comm) < 0 ||
        n4p_arg_ptr(a[8], "stream", &stream) < 0)
        return NULL;
    PyObject *arr_objs[4] = {a[1], a[2], a[4], a[5]};
    size_t *arr[4] = {NULL, NULL, NULL, NULL};
    int owned[4] = {0, 0, 0, 0};
    Py_ssize_t len[4], seqlen = -1;
    PyObject *res = NULL;
    for (int i = 0; i < 4; i++) {
        if (arr_objs[i] == Py_None) {
            PyErr_Format(PyExc_TypeError, "%s must be a sequence or an int address, not None",
                         arr_names[i]);
            goto done;
        }
        if (n4p_arg_size_array(arr_objs[i], arr_names[i], &arr[i], &len[i], &owned[i]) < 0)
            goto done;
        if (owned[i]) {
            if (seqlen >= 0 && len[i] != seqlen) {
                PyErr_SetString(PyExc_ValueError,
                                "sendcounts, sdispls, recvcounts and rdispls must have the same length");
                goto done;
            }
            seqlen = len[i];
        }
    }
    if (seqlen >= 0) {
        /* sequences must have one entry per rank, or the library reads past them */
        ncclCommCount_fn count = (ncclCommCount_fn)n4p_fns[N4P_IDX_ncclCommCount];
        int nranks = -1;
        ncclResult_t rc = ncclSuccess;
        if (count != NULL && comm != NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = count((ncclComm_t)comm, &nranks);
            Py_END_ALLOW_THREADS
        }
        if (n4p_status_failed(rc)) {
            n4p_raise_status(mod, rc);
            goto done;
        }
        if (nranks >= 0 && nranks != seqlen) {
            PyErr_Format(PyExc_ValueError,
                         "counts and displacements need one entry per rank (%d), got %zd", nranks,
                         seqlen);
            goto done;
        }
    }
    ncclResult_t r;
    CALL(fn(send, arr[0], arr[1], recv, arr[2], arr[3], (ncclDataType_t)dtype, (ncclComm_t)comm,
            (cudaStream_t)stream));
    res = n4p_status_none(mod, r);
done:
    for (int i = 0; i < 4; i++)
        if (owned[i])
            PyMem_Free(arr[i]);
    return res;
}

#define M(name) {#name, (PyCFunction)(void (*)(void))w_##name, METH_FASTCALL | METH_KEYWORDS, NULL}
PyMethodDef n4p_wrapper_methods[] = {
    M(get_version),
    M(get_unique_id),
    M(get_error_string),
    M(get_last_error),
    M(mem_alloc),
    M(comm_init_rank),
    M(comm_init_rank_config),
    M(comm_init_rank_scalable),
    M(comm_init_all),
    M(comm_split),
    M(comm_shrink),
    M(comm_get_unique_id),
    M(comm_grow),
    M(comm_mem_stats),
    M(comm_get_async_error),
    M(comm_count),
    M(comm_cu_device),
    M(comm_user_rank),
    M(comm_query_properties),
    M(comm_register),
    M(comm_window_register),
    M(win_get_user_ptr),
    M(red_op_create_pre_mul_sum),
    M(wait_signal),
    M(dev_comm_create),
    M(dev_comm_destroy),
    M(get_lsa_multimem_device_pointer),
    M(get_lsa_device_pointer),
    M(get_peer_device_pointer),
    M(all_to_all_v),
    {NULL, NULL, 0, NULL},
};
