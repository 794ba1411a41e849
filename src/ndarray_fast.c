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

PyObject *
n4p_py_ndarray_register(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_ndarray_register(type, samples: list)");
        return NULL;
    }
    n4p_state *st = n4p_get_state(mod);
    if (st->ndarray.type != NULL)
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
    st->ndarray.tried = 1;
    st->ndarray.off = off;
    if (off == NULL) {
        memcpy(st->ndarray.dtype_of, f.dtype_of, sizeof f.dtype_of);
        st->ndarray.type = (PyTypeObject *)Py_NewRef((PyObject *)tp);
    }
    return PyBool_FromLong(off == NULL);
}

void
n4p_ndarray_learn(n4p_ndarray_fast *f, PyObject *obj, int writable, const n4p_buffer *got)
{
    if (f->type == NULL || Py_TYPE(obj) != f->type)
        return; /* the layout is read only on an object of the checked type */
    const n4p_npy_array *v = (const n4p_npy_array *)obj;
    const int tn = v->descr->type_num;
    if (tn < N4P_NPY_USERDEF ||
        f->nuser >= N4P_NDARRAY_USER || n4p_ndarray_user(f, (unsigned)tn) != 0 ||
        got->dtype < 0 || got->dtype >= ncclNumTypes || !native_order(v))
        return;
    f->user_type[f->nuser] = tn;
    f->user_dtype[f->nuser] = (signed char)(got->dtype + 1);
    f->nuser++;
    answer q;
    if (!fast(f, obj, writable, &q) || q.ptr != got->ptr || q.count != got->count ||
        q.dtype != got->dtype || q.readonly != got->readonly)
        f->nuser--; /* not the general path's answer: that type stays there */
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

int
n4p_ndarray_classified(n4p_state *st, PyTypeObject *tp)
{
    if (st->ndarray.tried || strcmp(tp->tp_name, "numpy.ndarray") != 0)
        return 0;
    if (st->ndarray_check == NULL) { /* it registered into another instance of this module */
        st->ndarray.tried = 1;
        st->ndarray.off = "nccl._ndarray_check.register is not registered in this module";
        return 0;
    }
    st->ndarray.tried = 1; /* the samples are classified while it runs */
    PyObject *r = PyObject_CallOneArg(st->ndarray_check, (PyObject *)tp);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        st->ndarray.tried = 0; /* asked again at the next classification */
        return -1;
    }
    PyErr_Clear();
    if (st->ndarray.type == NULL)
        st->ndarray.off = "nccl._ndarray_check.register() raised";
    return 0;
}

PyObject *
n4p_py_ndarray_fast_info(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    const n4p_ndarray_fast *f = &n4p_get_state(mod)->ndarray;
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
