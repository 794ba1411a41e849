/*
 * args.c - converting Python arguments to C values.
 *
 * Rules (the same for every wrapper):
 *   - addresses and handles are Python ints (or objects with __index__),
 *     in [-2**63, 2**64); None is a TypeError, not a NULL pointer;
 *   - sizes are ints in [0, 2**64); C ints are range-checked; floats are
 *     rejected, never truncated;
 *   - out of range gives OverflowError, the wrong type TypeError, and the
 *     message names the parameter.
 */
#include "bindings.h"

#include <string.h>

static int
type_error(const char *name, const char *want, PyObject *o)
{
    PyErr_Format(PyExc_TypeError, "%s must be %s, not %.100s", name, want, Py_TYPE(o)->tp_name);
    return -1;
}

/* A new reference to an exact int for o, or NULL with TypeError. */
static PyObject *
as_index(PyObject *o, const char *name, const char *want)
{
    if (PyLong_Check(o))
        return Py_NewRef(o);
    if (o == Py_None || PyFloat_Check(o) || Py_TYPE(o)->tp_as_number == NULL ||
        Py_TYPE(o)->tp_as_number->nb_index == NULL) {
        type_error(name, want, o);
        return NULL;
    }
    return PyNumber_Index(o);
}

int
n4p_long_value(PyObject *o, long long *v)
{
    int overflow = 0;
    *v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0 && !(*v == -1 && PyErr_Occurred()))
        return 1;
    PyErr_Clear();
    return 0;
}

int
n4p_arg_ptr_slow(PyObject *o, const char *name, void **out)
{
    if (n4p_is_handle(o)) { /* a Comm or Window: its slot, without making an int */
        *out = *n4p_handle_slot(o);
        return 0;
    }
    PyObject *i = as_index(o, name, "an int (an address or handle)");
    if (i == NULL)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%s does not fit in a pointer", name);
            return -1;
        }
        *out = (void *)(uintptr_t)u;
        return 0;
    }
    Py_DECREF(i);
    if (overflow < 0) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit in a pointer", name);
        return -1;
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (void *)(intptr_t)v;
    return 0;
}

int
n4p_arg_out_ptr(PyObject *o, const char *name, void **out)
{
    if (n4p_arg_ptr(o, name, out) < 0)
        return -1;
    if (*out == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be the non-zero address of storage for the result "
                     "(e.g. box.address of a box = PointerBox() kept in a variable)", name);
        return -1;
    }
    return 0;
}

int
n4p_arg_size_slow(PyObject *o, const char *name, size_t *out)
{
    PyObject *i = as_index(o, name, "an int");
    if (i == NULL)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (overflow == 0 && v >= 0) {
        Py_DECREF(i);
        *out = (size_t)v;
        return 0;
    }
    if (overflow == 0 && v == -1 && PyErr_Occurred()) {
        Py_DECREF(i);
        return -1;
    }
    if (overflow < 0 || (overflow == 0 && v < 0)) {
        Py_DECREF(i);
        PyErr_Format(PyExc_OverflowError, "%s must be non-negative", name);
        return -1;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s does not fit in a size_t", name);
        return -1;
    }
    *out = (size_t)u;
    return 0;
}

/* An int in [lo, hi]; `ctype` names the C type in the error message. */
static int
arg_long_range(PyObject *o, const char *name, long lo, long hi, const char *ctype, long *out)
{
    PyObject *i = as_index(o, name, "an int");
    if (i == NULL)
        return -1;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit in a C %s", name, ctype);
        return -1;
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

int
n4p_arg_int_slow(PyObject *o, const char *name, int *out)
{
    long v;
    if (arg_long_range(o, name, INT_MIN, INT_MAX, "int", &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

int
n4p_arg_uint_slow(PyObject *o, const char *name, unsigned int *out)
{
    long v;
    if (arg_long_range(o, name, 0, (long)UINT_MAX, "unsigned int", &v) < 0)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

int
n4p_arg_bytes(PyObject *o, const char *name, Py_ssize_t minlen, int writable, n4p_bytes_arg *out)
{
    memset(out, 0, sizeof *out);
    if (PyLong_Check(o) || (!PyObject_CheckBuffer(o) && PyIndex_Check(o))) {
        if (n4p_arg_ptr(o, name, &out->ptr) < 0)
            return -1;
        if (out->ptr == NULL) {
            PyErr_Format(PyExc_ValueError, "%s must not be a null address", name);
            return -1;
        }
        return 0;
    }
    if (!PyObject_CheckBuffer(o))
        return type_error(name, "an int address or a contiguous buffer", o), -1;
    int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &out->view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a contiguous%s buffer of at least %zd bytes",
                     name, writable ? " writable" : "", minlen);
        return -1;
    }
    out->have_view = 1;
    if (out->view.len < minlen) {
        PyErr_Format(PyExc_ValueError, "%s must be at least %zd bytes, got %zd", name, minlen,
                     out->view.len);
        n4p_bytes_release(out);
        return -1;
    }
    out->ptr = out->view.buf;
    return 0;
}

void
n4p_bytes_release(n4p_bytes_arg *a)
{
    if (a->have_view) {
        PyBuffer_Release(&a->view);
        a->have_view = 0;
    }
}

/* Shared body of the int / size_t array converters. */
static int
arg_array(PyObject *o, const char *name, void **out, Py_ssize_t *len, int *owned, size_t elsize)
{
    *out = NULL;
    *len = -1;
    *owned = 0;
    if (o == Py_None)
        return 0;
    if (PyLong_Check(o) || PyIndex_Check(o))
        return n4p_arg_ptr(o, name, out);
    PyObject *seq = PySequence_Fast(o, "");
    if (seq == NULL) {
        PyErr_Clear();
        return type_error(name, "a sequence of ints, an int address or None", o), -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void *buf = PyMem_Calloc(n ? (size_t)n : 1, elsize);
    if (buf == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int rc;
        if (elsize == sizeof(int))
            rc = n4p_arg_int(item, name, &((int *)buf)[i]);
        else
            rc = n4p_arg_size(item, name, &((size_t *)buf)[i]);
        if (rc < 0) {
            PyMem_Free(buf);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *out = buf;
    *len = n;
    *owned = 1;
    return 0;
}

int
n4p_arg_int_array(PyObject *o, const char *name, int **out, Py_ssize_t *len, int *owned)
{
    return arg_array(o, name, (void **)out, len, owned, sizeof(int));
}

int
n4p_arg_size_array(PyObject *o, const char *name, size_t **out, Py_ssize_t *len, int *owned)
{
    return arg_array(o, name, (void **)out, len, owned, sizeof(size_t));
}

/* ------------------------------------------------ arrays with a length */

void
n4p_array_release(n4p_array_arg *a)
{
    PyMem_Free(a->owned);
    a->owned = NULL;
    n4p_bytes_release(&a->bytes);
    a->ptr = NULL;
}

int
n4p_arg_int_array_n(PyObject *o, const char *name, int n, const char *nname, n4p_array_arg *out)
{
    int *p, owned;
    Py_ssize_t len;
    if (n4p_arg_int_array(o, name, &p, &len, &owned) < 0)
        return -1;
    out->ptr = p;
    if (owned) {
        out->owned = p;
        if (len != n) {
            PyErr_Format(PyExc_ValueError, "%s has %zd entries but %s is %d", name, len, nname,
                         n);
            return -1;
        }
    }
    return 0;
}

int
n4p_arg_items(n4p_state *st, PyObject *o, const char *name, int n, const char *nname, size_t size,
              int struct_kind, n4p_array_arg *out)
{
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0", nname);
        return -1;
    }
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
        if (n4p_arg_bytes(o, name, (Py_ssize_t)((size_t)n * size), 0, &out->bytes) < 0)
            return -1;
        out->ptr = out->bytes.ptr;
        return 0;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(o);
    if (len != n) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries but %s is %d", name, len, nname, n);
        return -1;
    }
    char *items = PyMem_Calloc(n ? (size_t)n : 1, size);
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->ptr = out->owned = items;
    for (int i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(o, i);
        if (struct_kind >= 0) {
            void *p = n4p_struct_ptr(st, struct_kind, item);
            if (p == NULL) {
                const char *want = st->struct_types[struct_kind]->tp_name;
                const char *dot = strrchr(want, '.');
                PyErr_Format(PyExc_TypeError, "%s items must be %s, not %.100s", name,
                             dot ? dot + 1 : want, Py_TYPE(item)->tp_name);
                return -1;
            }
            memcpy(items + (size_t)i * size, p, size);
            continue;
        }
        n4p_bytes_arg b;
        if (n4p_arg_bytes(item, name, (Py_ssize_t)size, 0, &b) < 0)
            return -1;
        if (b.have_view && (size_t)b.view.len != size) {
            n4p_bytes_release(&b);
            PyErr_Format(PyExc_ValueError, "%s items must be exactly %zu bytes", name, size);
            return -1;
        }
        memcpy(items + (size_t)i * size, b.ptr, size);
        n4p_bytes_release(&b);
    }
    return 0;
}

/* ------------------------------------------------------------ unique ids */

int
n4p_arg_uid(PyObject *o, const char *name, ncclUniqueId *out)
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

int
n4p_arg_uid_opt(PyObject *o, const char *name, ncclUniqueId *store, const ncclUniqueId **out)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    if (PyLong_Check(o)) {
        void *p;
        if (n4p_arg_ptr(o, name, &p) < 0)
            return -1;
        *out = p;
        return 0;
    }
    if (n4p_arg_uid(o, name, store) < 0)
        return -1;
    *out = store;
    return 0;
}

/* ----------------------------------------------------------------- results */

PyObject *
n4p_str_result(const char *s)
{
    if (s == NULL)
        return PyUnicode_FromString("");
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* ----------------------------------------------------------- keyword parse */

Py_ssize_t
n4p_parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fname,
               const char *const *kw, Py_ssize_t minargs, Py_ssize_t maxargs, PyObject **out)
{
    if (kwnames == NULL && nargs >= minargs && nargs <= maxargs) {
        /* the common case: positional arguments only, the required ones given */
        Py_ssize_t i = 0;
        for (; i < nargs; i++)
            out[i] = args[i];
        for (; i < maxargs; i++)
            out[i] = NULL;
        return nargs;
    }
    if (nargs > maxargs) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", fname,
                     maxargs, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < maxargs; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        /* keyword names are str; the ASCII ones (all of ours) are read in place */
        const char *ks = PyUnicode_IS_COMPACT_ASCII(key) ? (const char *)PyUnicode_DATA(key)
                                                          : PyUnicode_AsUTF8(key);
        if (ks == NULL)
            return -1;
        Py_ssize_t slot = -1;
        for (Py_ssize_t i = 0; i < maxargs; i++) {
            if (kw[i][0] == ks[0] && strcmp(kw[i], ks) == 0) {
                slot = i;
                break;
            }
        }
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fname, ks);
            return -1;
        }
        if (out[slot] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, ks);
            return -1;
        }
        out[slot] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < minargs; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %zd)", fname,
                         kw[i], i + 1);
            return -1;
        }
    }
    return nargs + nkw;
}

int
n4p_parse_args_out(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fname,
                   const char *const *kw, Py_ssize_t n, Py_ssize_t opt, PyObject **out)
{
    if (n4p_nargs_total(nargs, kwnames) == n)
        return n4p_parse_args(args, nargs, kwnames, fname, kw, n, n, out) < 0 ? -1 : 1;
    /* the names and the arguments without the optional one */
    const char *kw1[N4P_MAX_ARGS + 1];
    PyObject *a1[N4P_MAX_ARGS];
    if (n > N4P_MAX_ARGS) {
        PyErr_Format(PyExc_SystemError, "%s() has too many parameters", fname);
        return -1;
    }
    for (Py_ssize_t i = 0, j = 0; i <= n; i++)
        if (i != opt)
            kw1[j++] = kw[i];
    if (n4p_parse_args(args, nargs, kwnames, fname, kw1, n - 1, n - 1, a1) < 0)
        return -1;
    for (Py_ssize_t i = 0, j = 0; i < n; i++)
        out[i] = i == opt ? NULL : a1[j++];
    return 0;
}

/* ------------------------------------------------- handles and structs */

int
n4p_arg_handle_slow(PyObject *o, const char *name, enum n4p_handle_kind kind, void **out)
{
    int c = n4p_handle_check(o, kind, name);
    if (c < 0)
        return -1;
    if (c > 0) {
        *out = *n4p_handle_slot(o);
        return 0;
    }
    return n4p_arg_ptr_slow(o, name, out);
}

/* The address of a struct argument; allow: 0 none, 1 NULL from 0, 2 NULL
 * from 0 and None. */
static int
arg_addr(PyObject *o, const char *name, int allow, void **out)
{
    const char *want = "an object with an int .ptr (a struct object) or an int address";
    if (o == Py_None) {
        if (allow < 2)
            return type_error(name, want, o);
        *out = NULL;
        return 0;
    }
    if (n4p_is_handle(o))
        return type_error(name, want, o);
    if (PyLong_Check(o) || PyIndex_Check(o)) {
        if (n4p_arg_ptr(o, name, out) < 0)
            return -1;
    } else {
        PyObject *p = PyObject_GetAttrString(o, "ptr");
        if (p == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
            return type_error(name, want, o);
        }
        int rc = PyLong_Check(p) ? n4p_arg_ptr(p, name, out) : type_error(name, want, o);
        Py_DECREF(p);
        if (rc < 0)
            return -1;
    }
    if (*out == NULL && allow == 0) {
        PyErr_Format(PyExc_ValueError, "%s must be non-zero: the library writes there", name);
        return -1;
    }
    return 0;
}

int
n4p_arg_addr_opt(PyObject *o, const char *name, void **out)
{
    return arg_addr(o, name, 2, out);
}

int
n4p_arg_addr(PyObject *o, const char *name, void **out)
{
    return arg_addr(o, name, 1, out);
}

int
n4p_arg_storage(PyObject *o, const char *name, void **out)
{
    return arg_addr(o, name, 0, out);
}

/* n C ints from a tuple of exactly n items, or the attributes attrs of o;
 * 0 when o is neither (nothing set), -1 with an exception. */
static int
ints_from(PyObject *o, const char *name, const char *const *attrs, int n, long long *vals,
          const char *want)
{
    if (PyTuple_Check(o)) {
        if (PyTuple_GET_SIZE(o) != n) {
            PyErr_Format(PyExc_ValueError, "%s must have %d items (%s), got %zd", name, n, want,
                         PyTuple_GET_SIZE(o));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            void *p;
            if (n4p_arg_ptr(PyTuple_GET_ITEM(o, i), name, &p) < 0)
                return -1;
            vals[i] = (long long)(intptr_t)p;
        }
        return 1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *v = PyObject_GetAttrString(o, attrs[i]);
        if (v == NULL) {
            if (i == 0 && PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                return 0;
            }
            return -1;
        }
        void *p;
        int rc = n4p_arg_ptr(v, name, &p);
        Py_DECREF(v);
        if (rc < 0)
            return -1;
        vals[i] = (long long)(intptr_t)p;
    }
    return 1;
}

/* Copy size bytes from the non-zero int address o. */
static int
from_address(PyObject *o, const char *name, void *out, size_t size)
{
    void *p;
    if (n4p_arg_ptr(o, name, &p) < 0)
        return -1;
    if (p == NULL) {
        PyErr_Format(PyExc_ValueError, "%s must not be a null address", name);
        return -1;
    }
    memcpy(out, p, size);
    return 0;
}

/* A struct passed by value: copied from an int address (returns 0), or its
 * n fields read into vals from a tuple or attributes (returns 1); -1 with
 * an exception. */
static int
by_value(PyObject *o, const char *name, const char *want, const char *const *attrs, int n,
         const char *items, long long *vals, void *out, size_t size)
{
    if (o == Py_None || n4p_is_handle(o) || PyFloat_Check(o))
        return type_error(name, want, o);
    if (!PyTuple_Check(o) && (PyLong_Check(o) || PyIndex_Check(o)))
        return from_address(o, name, out, size);
    int rc = ints_from(o, name, attrs, n, vals, items);
    if (rc == 0)
        return type_error(name, want, o);
    return rc;
}

int
n4p_arg_team(PyObject *o, const char *name, ncclTeam_t *out)
{
    static const char *const attrs[] = {"n_ranks", "rank", "stride"};
    long long v[3];
    int rc = by_value(o, name, "a Team, a (n_ranks, rank, stride) tuple, an object with those "
                      "attributes, or an int address", attrs, 3, "n_ranks, rank, stride", v,
                      out, sizeof *out);
    if (rc <= 0)
        return rc;
    for (int i = 0; i < 3; i++) {
        if (v[i] < INT_MIN || v[i] > INT_MAX) {
            PyErr_Format(PyExc_OverflowError, "%s.%s does not fit in a C int", name, attrs[i]);
            return -1;
        }
    }
    out->nRanks = (int)v[0];
    out->rank = (int)v[1];
    out->stride = (int)v[2];
    return 0;
}

int
n4p_arg_multimem(PyObject *o, const char *name, ncclMultimemHandle_t *out)
{
    static const char *const attrs[] = {"mc_base_ptr"};
    long long v;
    int rc = by_value(o, name, "a MultimemHandle, a (mc_base_ptr,) tuple, an object with an "
                      "int .mc_base_ptr, or an int address", attrs, 1, "mc_base_ptr", &v, out,
                      sizeof *out);
    if (rc <= 0)
        return rc;
    out->mcBasePtr = (void *)(intptr_t)v;
    return 0;
}

int
n4p_arg_cstr(PyObject *o, const char *name, const char **out)
{
    Py_ssize_t n;
    const char *s;
    if (PyUnicode_Check(o)) {
        if ((s = PyUnicode_AsUTF8AndSize(o, &n)) == NULL)
            return -1;
    } else if (PyBytes_Check(o)) {
        s = PyBytes_AS_STRING(o);
        n = PyBytes_GET_SIZE(o);
    } else {
        return type_error(name, "a str or bytes", o);
    }
    if ((size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s must not contain a NUL character", name);
        return -1;
    }
    *out = s;
    return 0;
}
