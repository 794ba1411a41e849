/*
 * ndarray_fast.h - the fast path of buffer resolution for numpy.ndarray.
 *
 * The buffer protocol on a NumPy array builds a PEP 3118 format string and
 * an info block per export (about 600 instructions, more than the rest of a
 * collective's checks); everything NCCL needs is in the array's own fields.
 * An object whose type is exactly numpy.ndarray is read through the layout
 * below: the leading members of NumPy's PyArrayObject_fields and
 * PyArray_Descr, the same in NumPy 1.x and 2.x.  No NumPy header is used;
 * the layout is trusted only after ndarray_fast.c has compared what it reads
 * with the buffer protocol's answer on a set of arrays (a mismatch turns the
 * fast path off for the process: the general path is used).
 *
 * The fast path answers only where its answer is the buffer protocol's
 * (buffer.c's from_buffer): a dtype whose type number the check learned
 * (the built-in numeric types NCCL has) or, for a user-defined type (number
 * N4P_NPY_USERDEF and up: ml_dtypes' bfloat16 and float8 types, which NumPy cannot
 * export through the buffer protocol), one the general path has resolved
 * through __array_interface__ and the fast path then read the same way
 * (n4p_ndarray_learn), native byte order, and a row-major layout as NumPy's
 * C-contiguous flag states it (the buffer protocol then reports canonical
 * strides) or no element at all.  Anything else (a subclass, a read-only
 * array passed as a receive buffer, a foreign byte order, a layout to
 * refuse, an unsupported dtype) takes the general path, which gives the
 * same result or the same error as before.
 */
#ifndef NCCL4PY_NDARRAY_FAST_H
#define NCCL4PY_NDARRAY_FAST_H

#include "bindings.h"

/* NumPy's flag bits (ndarraytypes.h; WARN_ON_WRITE is private, 1 << 31):
 * an array with WARN_ON_WRITE exports a read-only buffer. */
#define N4P_NPY_C_CONTIGUOUS 0x0001u
#define N4P_NPY_WRITEABLE 0x0400u
#define N4P_NPY_WARN_ON_WRITE 0x80000000u
/* NumPy's first type number of a user-defined dtype (NPY_USERDEF) */
#define N4P_NPY_USERDEF 256

#if PY_LITTLE_ENDIAN
#define N4P_NPY_NATIVE '<'
#else
#define N4P_NPY_NATIVE '>'
#endif

typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind;
    char type;
    char byteorder; /* '=' native, '|' not applicable, '<' or '>' */
    char former_flags;
    int type_num;
} n4p_npy_descr;

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    n4p_npy_descr *descr;
    int flags;
} n4p_npy_array;

/* The NCCL dtype + 1 learned for a user-defined type number, or 0. */
static inline int
n4p_ndarray_user(const n4p_ndarray_fast *f, unsigned tn)
{
    const int n = N4P_FT_LOAD(&f->nuser); /* entries below it are written */
    for (int i = 0; i < n; i++)
        if ((unsigned)f->user_type[i] == tn)
            return f->user_dtype[i];
    return 0;
}

/* After the general path resolved `obj` into `got`: when obj is exactly the
 * fast path's type and its dtype has a user-defined type number the fast path does
 * not know, learn its NCCL dtype, and keep it only if the fast path then
 * gives obj exactly `got` (pointer, count, dtype, read-only flag), as the
 * check (ndarray_fast.c) requires of the built-in types. */
void n4p_ndarray_learn(n4p_ndarray_fast *f, PyObject *obj, int writable, const n4p_buffer *got);

/* Fill out (as n4p_buffer_resolve would, the array referenced until
 * release) and return 1, or return 0 to let the general path decide.  obj's
 * type is f->type. */
static inline int
n4p_ndarray_read(const n4p_ndarray_fast *f, PyObject *obj, int writable, n4p_buffer *out)
{
    const n4p_npy_array *a = (const n4p_npy_array *)obj;
    unsigned tn = (unsigned)a->descr->type_num;
    char order = a->descr->byteorder;
    unsigned flags = (unsigned)a->flags;
    int dtype1 = tn < N4P_NDARRAY_TYPES ? f->dtype_of[tn] : n4p_ndarray_user(f, tn);
    if (dtype1 == 0 || (order != '=' && order != '|' && order != N4P_NPY_NATIVE))
        return 0;
    int readonly = !(flags & N4P_NPY_WRITEABLE) || (flags & N4P_NPY_WARN_ON_WRITE);
    if ((readonly && writable) || a->nd < 0)
        return 0;
    size_t count = 1;
    for (int i = 0; i < a->nd; i++)
        count *= (size_t)a->dimensions[i]; /* NumPy keeps the product within npy_intp */
    if (count != 0 && !(flags & N4P_NPY_C_CONTIGUOUS))
        return 0;
    out->ptr = a->data;
    out->count = count;
    out->dtype = dtype1 - 1;
    out->readonly = readonly;
    out->ref = Py_NewRef(obj); /* as the buffer view would: the array stays put */
    return 1;
}

/* Module init: imports nccl._ndarray_check, which registers its register()
 * as the module state's ndarray_check. */
int n4p_init_ndarray(PyObject *mod, n4p_state *st);
/* Called when a type named numpy.ndarray is first classified: calls the
 * registered nccl._ndarray_check.register, which makes the sample arrays and
 * calls nccl._nccl._ndarray_register.  0 (the fast path on or off), or -1 when
 * the check was interrupted (an exception that is not an Exception). */
int n4p_ndarray_classified(n4p_state *st, PyTypeObject *tp);
PyObject *n4p_py_ndarray_register(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *n4p_py_ndarray_fast_info(PyObject *mod, PyObject *unused);

#endif
