/*
 * producers.c - hand-written DLPack producers for the buffer resolution
 * tests (built by tests/test_buffer_resolution.py, loaded with ctypes.PyDLL).
 *
 * Every tensor made here counts the calls of its deleter, so the tests can
 * check that a consumer calls it exactly once.  A capsule that was never
 * consumed (its name does not start with "used_") calls the deleter from its
 * destructor, as real producers do.
 *
 * Tensor specs are tuples:
 *   (versioned, data, shape, strides|None, code, bits, lanes,
 *    device_type, device_id, byte_offset, flags, version_major, capsule_name|None)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "dlpack.h"

#define MAXDIM 8

typedef struct {
    int versioned;
    union {
        n4p_dlmanaged_v v;
        n4p_dlmanaged l;
    } u;
    int64_t shape[MAXDIM];
    int64_t strides[MAXDIM];
    char name[64];
} holder;

static long deleter_calls;

static void
del_v(n4p_dlmanaged_v *m)
{
    deleter_calls++;
    free(m->manager_ctx);
}

static void
del_l(n4p_dlmanaged *m)
{
    deleter_calls++;
    free(m->manager_ctx);
}

static int
read_dims(PyObject *t, int64_t *out, int *n)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > MAXDIM) {
        PyErr_SetString(PyExc_TypeError, "dims must be a tuple of at most 8 ints");
        return -1;
    }
    *n = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < *n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* Fill a tensor (shape/strides pointing into h) from a spec; NULL h->... */
static holder *
make_holder(PyObject *spec)
{
    int versioned, dtype_code, bits, lanes, dev_type, dev_id;
    unsigned long long data, offset, flags;
    unsigned int major;
    PyObject *shape, *strides;
    const char *name = NULL;
    if (!PyArg_ParseTuple(spec, "pKOOiiiiiKKIz", &versioned, &data, &shape, &strides,
                          &dtype_code, &bits, &lanes, &dev_type, &dev_id, &offset, &flags, &major,
                          &name))
        return NULL;
    holder *h = calloc(1, sizeof(holder));
    if (h == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    int ndim, nstrides = 0;
    if (read_dims(shape, h->shape, &ndim) < 0 ||
        (strides != Py_None && read_dims(strides, h->strides, &nstrides) < 0)) {
        free(h);
        return NULL;
    }
    h->versioned = versioned;
    n4p_dltensor *t = versioned ? &h->u.v.dl_tensor : &h->u.l.dl_tensor;
    t->data = (void *)(uintptr_t)data;
    t->device.device_type = dev_type;
    t->device.device_id = dev_id;
    t->ndim = ndim;
    t->dtype.code = (uint8_t)dtype_code;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = (uint16_t)lanes;
    t->shape = h->shape;
    t->strides = strides == Py_None ? NULL : h->strides;
    t->byte_offset = offset;
    if (versioned) {
        h->u.v.version.major = major;
        h->u.v.version.minor = 1;
        h->u.v.manager_ctx = h;
        h->u.v.deleter = del_v;
        h->u.v.flags = flags;
    }
    else {
        h->u.l.manager_ctx = h;
        h->u.l.deleter = del_l;
    }
    snprintf(h->name, sizeof(h->name), "%s",
             name ? name : versioned ? N4P_CAPSULE_VERSIONED : N4P_CAPSULE_LEGACY);
    return h;
}

static void
capsule_destructor(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    if (name != NULL && strncmp(name, "used_", 5) == 0)
        return;
    holder *h = PyCapsule_GetContext(cap);
    if (h->versioned)
        del_v(&h->u.v);
    else
        del_l(&h->u.l);
}

/* A DLPack capsule for spec. */
PyObject *
t_make_capsule(PyObject *spec)
{
    holder *h = make_holder(spec);
    if (h == NULL)
        return NULL;
    PyObject *cap = PyCapsule_New(&h->u, h->name, capsule_destructor);
    if (cap == NULL || PyCapsule_SetContext(cap, h) < 0) {
        Py_XDECREF(cap);
        free(h);
        return NULL;
    }
    return cap;
}

long
t_deleter_calls(void)
{
    return deleter_calls;
}

/* ------------------------------------------------- the C exchange API */

/* The object's `_dl` attribute is its tensor spec. */
static holder *
holder_of(void *py_object)
{
    PyObject *spec = PyObject_GetAttrString((PyObject *)py_object, "_dl");
    if (spec == NULL)
        return NULL;
    holder *h = make_holder(spec);
    Py_DECREF(spec);
    return h;
}

static holder borrowed; /* storage for the non-owning fill (test only) */

static int
fill_no_sync(void *py_object, n4p_dltensor *out)
{
    holder *h = holder_of(py_object);
    if (h == NULL)
        return -1;
    memcpy(&borrowed, h, sizeof(borrowed));
    n4p_dltensor *t = h->versioned ? &h->u.v.dl_tensor : &h->u.l.dl_tensor;
    *out = *t;
    out->shape = borrowed.shape;
    out->strides = t->strides ? borrowed.strides : NULL;
    free(h);
    return 0;
}

static int
managed_no_sync(void *py_object, n4p_dlmanaged_v **out)
{
    holder *h = holder_of(py_object);
    if (h == NULL)
        return -1;
    if (!h->versioned) {
        free(h);
        PyErr_SetString(PyExc_ValueError, "exchange specs must be versioned");
        return -1;
    }
    *out = &h->u.v;
    return 0;
}

static int
fail_silently(void *py_object, n4p_dlmanaged_v **out)
{
    (void)py_object;
    (void)out;
    return -1;
}

/* 0: both functions; 1: managed only; 2: a version-2 table chaining to 0;
 * 3: managed only, failing without an exception; 4: a version-2 table alone */
static n4p_dlexchange_api tables[5] = {
    {{{1, 2}, NULL}, NULL, managed_no_sync, NULL, fill_no_sync, NULL},
    {{{1, 2}, NULL}, NULL, managed_no_sync, NULL, NULL, NULL},
    {{{2, 0}, &tables[0].header}, NULL, NULL, NULL, NULL, NULL},
    {{{1, 2}, NULL}, NULL, fail_silently, NULL, NULL, NULL},
    {{{2, 0}, NULL}, NULL, managed_no_sync, NULL, fill_no_sync, NULL},
};

PyObject *
t_exchange_capsule(int which)
{
    return PyCapsule_New(&tables[which], N4P_CAPSULE_EXCHANGE_API, NULL);
}

PyObject *
t_exchange_address(int which)
{
    return PyLong_FromVoidPtr(&tables[which]);
}

/* ------------------------------------------- a buffer with any format */

/* An object exporting 16 zero bytes through the buffer protocol, as 16 /
 * itemsize items of the struct-module format it was made with (formats
 * such as "!i" that no standard exporter produces). */
typedef struct {
    PyObject_HEAD
    char format[32];
    Py_ssize_t itemsize;
    Py_ssize_t shape;
    char data[16];
} formatted;

static int
formatted_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    formatted *f = (formatted *)self;
    (void)flags;
    view->obj = Py_NewRef(self);
    view->buf = f->data;
    view->len = (Py_ssize_t)sizeof(f->data);
    view->readonly = 0;
    view->itemsize = f->itemsize;
    view->format = f->format;
    view->ndim = 1;
    view->shape = &f->shape;
    view->strides = &f->itemsize;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyType_Slot formatted_slots[] = {
    {Py_bf_getbuffer, (void *)formatted_getbuffer},
    {0, NULL},
};
static PyType_Spec formatted_spec = {"producers.Formatted", sizeof(formatted), 0,
                                     Py_TPFLAGS_DEFAULT, formatted_slots};
static PyObject *formatted_type;

/* A new exporter of format fmt with items of itemsize bytes (1, 2, 4, 8 or 16). */
PyObject *
t_formatted(const char *fmt, Py_ssize_t itemsize)
{
    if (formatted_type == NULL && (formatted_type = PyType_FromSpec(&formatted_spec)) == NULL)
        return NULL;
    if (itemsize <= 0 || 16 % itemsize != 0 || strlen(fmt) >= 32) {
        PyErr_SetString(PyExc_ValueError, "bad format or itemsize");
        return NULL;
    }
    formatted *f = PyObject_New(formatted, (PyTypeObject *)formatted_type);
    if (f == NULL)
        return NULL;
    snprintf(f->format, sizeof(f->format), "%s", fmt);
    f->itemsize = itemsize;
    f->shape = 16 / itemsize;
    memset(f->data, 0, sizeof(f->data));
    return (PyObject *)f;
}
