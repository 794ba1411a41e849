/*
 * ndarray_fast.c - the check that turns the numpy.ndarray fast path on
 * (ndarray_fast.h explains the path itself).
 *
 * When buffer.c first classifies a type named numpy.ndarray, it calls
 * nccl._ndarray_check.register(type), which that module registers into the
 * module state (module.c: _register) when it is imported, by
 * n4p_init_ndarray at the latest; it makes sample arrays of that
 * type (every built-in dtype in every byte order, hostile layouts, read-only
 * and broadcast arrays, empty and 0-d ones) from the NumPy module already
 * loaded, and hands them to _ndarray_register (NumPy is never imported
 * here).  The check, in two passes over the samples:
 *
 *   learn   each sample's fields as the layout reads them must match the
 *           array's own dtype and ndim (before anything they point to is
 *           read); a sample the general path (the buffer protocol) resolves
 *           gives its type number's NCCL dtype, and two samples of one type
 *           number must agree;
 *   verify  for every sample, read-only and writable, wherever the fast
 *           path answers, the general path must give the same pointer,
 *           count, dtype and read-only flag.
 *
 * Any disagreement, or no float32 sample answered, leaves the fast path off
 * for this module (the general path serves every array; _ndarray_fast_info
 * says why).  It runs once per module state.
 */
#include "ndarray_fast.h"

#include <string.h>

/* What a path answered for a sample. */
typedef struct {
    int ok;
    void *ptr;
    size_t count;
    int dtype, readonly;
} answer;

/* 0 with *r filled (r->ok = 0: refused with an Exception, cleared), or -1
 * when the general path was interrupted (an exception that is no Exception). */
static int
general(PyObject *mod, PyObject *a, int writable, answer *r)
{
    n4p_buffer b;
    int flags = N4P_BUF_GENERAL | (writable ? N4P_BUF_WRITABLE : 0);
    memset(r, 0, sizeof *r);
    if (n4p_buffer_resolve(mod, a, "sample", flags, &b) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
        return 0;
    }
    *r = (answer){1, b.ptr, b.count, b.dtype, b.readonly};
    n4p_buffer_release(&b);
    return 0;
}

static int
fast(const n4p_ndarray_fast *f, PyObject *a, int writable, answer *r)
{
    n4p_buffer b;
    memset(&b, 0, sizeof b);
    memset(r, 0, sizeof *r);
    if (!n4p_ndarray_read(f, a, writable, &b))
        return 0;
    Py_CLEAR(b.ref);
    *r = (answer){1, b.ptr, b.count, b.dtype, b.readonly};
    return 1;
}

/* 1 when the layout's descr and nd are the array's own dtype and ndim
 * (compared before either is used to read further), 0 when not, -1 on an
 * error that is no Exception. */
static int
fields_match(PyObject *a)
{
    const n4p_npy_array *v = (const n4p_npy_array *)a;
    PyObject *dt = PyObject_GetAttrString(a, "dtype");
    PyObject *nd = dt != NULL ? PyObject_GetAttrString(a, "ndim") : NULL;
    int r = 0;
    if (nd != NULL && PyLong_Check(nd)) {
        long n = PyLong_AsLong(nd);
        r = (PyObject *)v->descr == dt && n == v->nd;
    }
    Py_XDECREF(dt);
    Py_XDECREF(nd);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
        r = 0;
    }
    return r;
}

static int
native_order(const n4p_npy_array *v)
{
    char o = v->descr->byteorder;
    return o == '=' || o == '|' || o == N4P_NPY_NATIVE;
}

/* NULL when the layout passed (f filled), else why not; *interrupted set
 * (and an exception) when the check could not finish. */
static const char *
check(PyObject *mod, PyTypeObject *tp, PyObject *samples, n4p_ndarray_fast *f, int *interrupted)
{
    Py_ssize_t n = PyTuple_GET_SIZE(samples);
    answer g, q;
    *interrupted = 0;
    if (tp->tp_basicsize < (Py_ssize_t)sizeof(n4p_npy_array) || tp->tp_as_buffer == NULL ||
        tp->tp_as_buffer->bf_getbuffer == NULL)
        return "the type is smaller than the layout or has no buffer protocol";
    for (Py_ssize_t i = 0; i < n; i++) { /* learn */
        PyObject *a = PyTuple_GET_ITEM(samples, i);
        if (Py_TYPE(a) != tp)
            return "a sample is not of the type";
        int m = fields_match(a);
        if (m <= 0) {
            *interrupted = m < 0;
            return "the layout does not read a sample's dtype and ndim";
        }
        if (general(mod, a, 0, &g) < 0) {
            *interrupted = 1;
            return "interrupted";
        }
        const n4p_npy_array *v = (const n4p_npy_array *)a;
        unsigned tn = (unsigned)v->descr->type_num;
        if (!g.ok || !native_order(v) || tn >= N4P_NDARRAY_TYPES)
            continue;
        if (f->dtype_of[tn] != 0 && f->dtype_of[tn] != g.dtype + 1)
            return "two samples of one type number resolve to different dtypes";
        f->dtype_of[tn] = (signed char)(g.dtype + 1);
    }
    int float32 = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* verify */
        PyObject *a = PyTuple_GET_ITEM(samples, i);
        for (int w = 0; w <= 1; w++) {
            if (!fast(f, a, w, &q))
                continue;
            if (general(mod, a, w, &g) < 0) {
                *interrupted = 1;
                return "interrupted";
            }
            if (!g.ok || g.ptr != q.ptr || g.count != q.count || g.dtype != q.dtype ||
                g.readonly != q.readonly)
                return "the layout's answer differs from the buffer protocol's on a sample";
            float32 |= q.dtype == ncclFloat32;
        }
    }
    return float32 ? NULL : "no float32 sample took the fast path";
}

/* The fast path's table (all but `tried` and `mu`): the caller holds src's
 * mutex, under which every one of these fields is written. */
static void
copy_table(n4p_ndarray_fast *dst, const n4p_ndarray_fast *src)
{
    dst->type = src->type;
    dst->off = src->off;
    memcpy(dst->dtype_of, src->dtype_of, sizeof dst->dtype_of);
    dst->nuser = src->nuser;
    memcpy(dst->user_type, src->user_type, sizeof dst->user_type);
    memcpy(dst->user_dtype, src->user_dtype, sizeof dst->user_dtype);
}

PyObject *
n4p_py_ndarray_register(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_ndarray_register(type, samples: list)");
        return NULL;
    }
    n4p_state *st = n4p_get_state(mod);
    if (N4P_FT_LOAD(&st->ndarray.type) != NULL)
        return PyBool_FromLong(1); /* on already: the check ran once */
    PyTypeObject *tp = (PyTypeObject *)args[0];
    n4p_ndarray_fast f;
    memset(&f, 0, sizeof f);
    int interrupted;
    PyObject *samples = PyList_AsTuple(args[1]); /* whole while Python code runs */
    if (samples == NULL)
        return NULL;
    const char *off = check(mod, tp, samples, &f, &interrupted);
    Py_DECREF(samples);
    if (interrupted)
        return NULL;
    /* the table is written before the type that turns the fast path on is
     * published; a check another thread finished first stays */
    n4p_lock(&st->ndarray.mu);
    int on = st->ndarray.type != NULL;
    if (!on) {
        N4P_FT_STORE(&st->ndarray.tried, 1);
        st->ndarray.off = off;
        if (off == NULL) {
            memcpy(st->ndarray.dtype_of, f.dtype_of, sizeof f.dtype_of);
            N4P_FT_STORE(&st->ndarray.type, (PyTypeObject *)Py_NewRef((PyObject *)tp));
            on = 1;
        }
    }
    n4p_unlock(&st->ndarray.mu);
    return PyBool_FromLong(on);
}

void
n4p_ndarray_learn(n4p_ndarray_fast *f, PyObject *obj, int writable, const n4p_buffer *got)
{
    PyTypeObject *type = N4P_FT_LOAD(&f->type);
    if (type == NULL || Py_TYPE(obj) != type)
        return; /* the layout is read only on an object of the checked type */
    const n4p_npy_array *v = (const n4p_npy_array *)obj;
    const int tn = v->descr->type_num;
    if (tn < N4P_NPY_USERDEF || n4p_ndarray_user(f, (unsigned)tn) != 0 ||
        got->dtype < 0 || got->dtype >= ncclNumTypes || !native_order(v))
        return;
    /* Tried on a copy (other threads read f meanwhile), then appended: an
     * entry below nuser never changes, and nuser is published after it. */
    n4p_lock(&f->mu);
    int n = f->nuser;
    if (n < N4P_NDARRAY_USER && n4p_ndarray_user(f, (unsigned)tn) == 0) {
        n4p_ndarray_fast trial;
        copy_table(&trial, f);
        trial.user_type[n] = tn;
        trial.user_dtype[n] = (signed char)(got->dtype + 1);
        trial.nuser = n + 1;
        answer q;
        if (fast(&trial, obj, writable, &q) && q.ptr == got->ptr && q.count == got->count &&
            q.dtype == got->dtype && q.readonly == got->readonly) {
            f->user_type[n] = tn;
            f->user_dtype[n] = (signed char)(got->dtype + 1);
            N4P_FT_STORE(&f->nuser, n + 1);
        } /* else not the general path's answer: that type stays there */
    }
    n4p_unlock(&f->mu);
}

int
n4p_init_ndarray(PyObject *Py_UNUSED(mod), n4p_state *Py_UNUSED(st))
{
    /* it imports nccl._nccl (this module, already in sys.modules) and
     * registers its register() (module.c: _register); when it is the module
     * being imported, it registers once this init has returned */
    PyObject *m = PyImport_ImportModule("nccl._ndarray_check");
    if (m == NULL)
        return -1;
    Py_DECREF(m);
    return 0;
}

/* Take the check: 1 when this thread runs it (tried was 0), 0 when it has
 * run or another thread is running it (that thread uses the general path
 * meanwhile). */
static int
take_check(n4p_ndarray_fast *f)
{
#if N4P_FREE_THREADED
    int expected = 0;
    return __atomic_compare_exchange_n(&f->tried, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
#else
    if (f->tried)
        return 0;
    f->tried = 1;
    return 1;
#endif
}

int
n4p_ndarray_classified(n4p_state *st, PyTypeObject *tp)
{
    if (N4P_FT_LOAD(&st->ndarray.tried) || strcmp(tp->tp_name, "numpy.ndarray") != 0 ||
        !take_check(&st->ndarray)) /* the samples are classified while it runs */
        return 0;
    PyObject *check_fn = n4p_registered(st, &st->ndarray_check);
    if (check_fn == NULL) { /* it registered into another instance of this module */
        n4p_lock(&st->ndarray.mu);
        st->ndarray.off = "nccl._ndarray_check.register is not registered in this module";
        n4p_unlock(&st->ndarray.mu);
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(check_fn, (PyObject *)tp);
    Py_DECREF(check_fn);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        N4P_FT_STORE(&st->ndarray.tried, 0); /* asked again at the next classification */
        return -1;
    }
    PyErr_Clear();
    n4p_lock(&st->ndarray.mu);
    if (st->ndarray.type == NULL)
        st->ndarray.off = "nccl._ndarray_check.register() raised";
    n4p_unlock(&st->ndarray.mu);
    return 0;
}

PyObject *
n4p_py_ndarray_fast_info(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    n4p_ndarray_fast *live = &n4p_get_state(mod)->ndarray, copy;
    n4p_lock(&live->mu); /* a consistent copy: the writers hold mu */
    copy_table(&copy, live);
    copy.tried = N4P_FT_LOAD(&live->tried); /* the one field written without mu */
    n4p_unlock(&live->mu);
    const n4p_ndarray_fast *f = &copy;
    PyObject *dtypes = PyDict_New();
    if (dtypes == NULL)
        return NULL;
    /* the built-in type numbers, then the learned user-defined ones */
    for (int i = 0; i < N4P_NDARRAY_TYPES + f->nuser; i++) {
        const int user = i >= N4P_NDARRAY_TYPES;
        const int tn = user ? f->user_type[i - N4P_NDARRAY_TYPES] : i;
        const int d1 = user ? f->user_dtype[i - N4P_NDARRAY_TYPES] : f->dtype_of[i];
        if (d1 == 0)
            continue;
        PyObject *k = PyLong_FromLong(tn), *v = PyLong_FromLong(d1 - 1);
        int rc = k != NULL && v != NULL ? PyDict_SetItem(dtypes, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(dtypes);
            return NULL;
        }
    }
    return Py_BuildValue("{s:O,s:O,s:s,s:N}", "on", f->type != NULL ? Py_True : Py_False,
                         "tried", f->tried ? Py_True : Py_False, "off", f->off ? f->off : "",
                         "dtypes", dtypes);
}
