/*
 * stream.c - stream arguments -> the raw cudaStream_t / hipStream_t handle.
 *
 * None is 0 (the legacy default stream, as upstream nccl4py); ints (and
 * int-likes with __index__) are handles.  Other objects are read the way
 * their type was first read, cached in st->stream_kinds (type -> kind; the
 * dict keeps the type alive):
 *
 *   __cuda_stream__()  the protocol: must return (0, handle)
 *   .handle            cuda.core Stream (the value may be a CUstream: int())
 *   .cuda_stream       torch.cuda.Stream before __cuda_stream__
 *   .ptr               CuPy streams before __cuda_stream__
 *   int(obj)           objects that only convert to int (hip-python streams,
 *                      cuda.bindings CUstream)
 *
 * An attribute kind is cached as the interned attribute name itself.  Types
 * declaring none of these are probed on the instance at each call.
 */
#include "bindings.h"

enum { S_PROTOCOL = 1, S_INT, S_PROBE };

#define KIND_CACHE_MAX 1024

static int
err_stream(PyObject *obj)
{
    PyErr_Format(PyExc_TypeError,
                 "stream must be None, an int handle, an object with __cuda_stream__(), or a "
                 "stream object with .handle, .cuda_stream or .ptr (cuda.core, torch, CuPy, "
                 "hip-python); got %.200s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* o converts to a handle: __index__, or __int__ without being a real number
 * (floats, NumPy floating scalars: anything with __float__) or a bool. */
static int
has_nb(PyObject *o, int want_index)
{
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    if (nb == NULL || PyBool_Check(o))
        return 0;
    if (want_index)
        return nb->nb_index != NULL;
    return nb->nb_int != NULL && nb->nb_float == NULL;
}

/* A handle from an int-like value found through a protocol or attribute. */
static int
handle_value(PyObject *obj, PyObject *v, const char *what, void **out)
{
    if (has_nb(v, 1))
        return n4p_arg_ptr(v, what, out);
    if (has_nb(v, 0)) {
        PyObject *i = PyNumber_Long(v);
        if (i == NULL)
            return -1;
        int r = n4p_arg_ptr(i, what, out);
        Py_DECREF(i);
        return r;
    }
    PyErr_Format(PyExc_TypeError, "%s of %.200s must be an int handle, not %.200s", what,
                 Py_TYPE(obj)->tp_name, Py_TYPE(v)->tp_name);
    return -1;
}

static int
from_protocol(n4p_state *st, PyObject *obj, void **out)
{
    PyObject *args[2] = {NULL, obj};
    PyObject *r = PyObject_VectorcallMethod(st->str_cuda_stream, args + 1,
                                            1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL)
        return -1;
    int rc = -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%.200s.__cuda_stream__() must return a (version, handle) tuple, not "
                     "%.200s",
                     Py_TYPE(obj)->tp_name, Py_TYPE(r)->tp_name);
        goto done;
    }
    PyObject *version = PyTuple_GET_ITEM(r, 0);
    if (!PyLong_Check(version)) {
        PyErr_Format(PyExc_TypeError,
                     "%.200s.__cuda_stream__() returned a version of type %.200s, not int",
                     Py_TYPE(obj)->tp_name, Py_TYPE(version)->tp_name);
        goto done;
    }
    int overflow;
    long v = PyLong_AsLongAndOverflow(version, &overflow);
    if (v != 0 || overflow) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError,
                         "%.200s.__cuda_stream__() returned version %R; only version 0 is "
                         "supported",
                         Py_TYPE(obj)->tp_name, version);
        goto done;
    }
    rc = handle_value(obj, PyTuple_GET_ITEM(r, 1), "the __cuda_stream__() handle", out);
done:
    Py_DECREF(r);
    return rc;
}

static int
from_attribute(PyObject *obj, PyObject *attr, void **out)
{
    Py_INCREF(attr); /* borrowed from the cache, which Python code may clear */
    PyObject *v = PyObject_GetAttr(obj, attr);
    int r = -1;
    if (v != NULL) {
        const char *what = PyUnicode_AsUTF8(attr);
        r = what != NULL ? handle_value(obj, v, what, out) : -1;
        Py_DECREF(v);
    }
    Py_DECREF(attr);
    return r;
}

static const char *const stream_attrs[] = {"handle", "cuda_stream", "ptr"};

/* 1 when obj (a type or an instance) has the attribute, 0 if not, -1. */
static int
has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v != NULL) {
        Py_DECREF(v);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* New reference: an int kind, or the interned attribute name to read. */
static PyObject *
classify(n4p_state *st, PyTypeObject *tp)
{
    PyObject *t = (PyObject *)tp;
    int r = has_attr(t, st->str_cuda_stream);
    if (r != 0)
        return r < 0 ? NULL : PyLong_FromLong(S_PROTOCOL);
    for (size_t i = 0; i < sizeof(stream_attrs) / sizeof(stream_attrs[0]); i++) {
        PyObject *name = PyUnicode_InternFromString(stream_attrs[i]);
        if (name == NULL)
            return NULL;
        r = has_attr(t, name);
        if (r != 0) {
            if (r > 0)
                return name;
            Py_DECREF(name);
            return NULL;
        }
        Py_DECREF(name);
    }
    PyNumberMethods *nb = tp->tp_as_number;
    if (nb != NULL && nb->nb_int != NULL && nb->nb_float == NULL)
        return PyLong_FromLong(S_INT);
    return PyLong_FromLong(S_PROBE);
}

/* The cache value for tp, NULL on error: borrowed with a GIL (no other
 * thread runs until it is used), a new reference on a free-threaded build
 * (another thread may clear the cache meanwhile); N4P_FT_UNREF it. */
static PyObject *
kind_of(n4p_state *st, PyTypeObject *tp)
{
#if N4P_FREE_THREADED
    PyObject *v;
    int got = n4p_dict_get_ref(st->stream_kinds, (PyObject *)tp, &v);
    if (got != 0)
        return v;
#else
    PyObject *v = PyDict_GetItemWithError(st->stream_kinds, (PyObject *)tp);
    if (v != NULL || PyErr_Occurred())
        return v;
#endif
    if ((v = classify(st, tp)) == NULL)
        return NULL;
    if (PyDict_GET_SIZE(st->stream_kinds) >= KIND_CACHE_MAX)
        PyDict_Clear(st->stream_kinds);
    if (PyDict_SetItem(st->stream_kinds, (PyObject *)tp, v) < 0) {
        Py_DECREF(v);
        return NULL;
    }
#if !N4P_FREE_THREADED
    Py_DECREF(v); /* the dict holds it */
#endif
    return v;
}

/* Look for the protocol or an attribute on the instance. */
static int
from_probe(n4p_state *st, PyObject *obj, void **out)
{
    int r = has_attr(obj, st->str_cuda_stream);
    if (r != 0)
        return r < 0 ? -1 : from_protocol(st, obj, out);
    for (size_t i = 0; i < sizeof(stream_attrs) / sizeof(stream_attrs[0]); i++) {
        PyObject *v = PyObject_GetAttrString(obj, stream_attrs[i]);
        if (v != NULL) {
            r = handle_value(obj, v, stream_attrs[i], out);
            Py_DECREF(v);
            return r;
        }
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    }
    return err_stream(obj);
}

int
n4p_stream_resolve(PyObject *mod, PyObject *obj, void **out)
{
    if (obj == Py_None) {
        *out = NULL;
        return 0;
    }
    if (PyLong_CheckExact(obj) || (has_nb(obj, 1)))
        return n4p_arg_ptr(obj, "stream", out);
    if (PyFloat_Check(obj) || PyBool_Check(obj))
        return err_stream(obj);
    n4p_state *st = n4p_get_state(mod);
    PyObject *v = kind_of(st, Py_TYPE(obj));
    if (v == NULL)
        return -1;
    int r;
    if (PyUnicode_CheckExact(v))
        r = from_attribute(obj, v, out);
    else
        switch (PyLong_AsLong(v)) {
        case S_PROTOCOL: r = from_protocol(st, obj, out); break;
        case S_INT: r = handle_value(obj, obj, "int()", out); break;
        default: r = from_probe(st, obj, out);
        }
    N4P_FT_UNREF(v);
    return r;
}

PyObject *
n4p_py_resolve_stream(PyObject *mod, PyObject *arg)
{
    void *handle;
    if (n4p_stream_resolve(mod, arg, &handle) < 0)
        return NULL;
    return PyLong_FromVoidPtr(handle);
}
