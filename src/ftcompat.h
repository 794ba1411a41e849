/*
 * ftcompat.h - free-threading idioms, and what they compile to elsewhere.
 *
 * On a free-threaded build (Py_GIL_DISABLED, CPython 3.13t and later) two
 * threads run the extension's C code at once, so shared mutable state needs
 * a lock, an atomic access, or a strong reference where a borrowed one
 * could be dropped by another thread.  With a GIL (every build of 3.10 to
 * 3.12, the default build of 3.13 and later) the GIL serializes that code,
 * and these helpers compile to the plain code they replace: the GIL build
 * pays nothing (bench/README.md, "free-threading").
 *
 *   n4p_mutex          PyMutex (one byte, no allocation) where threads run
 *                      free; an empty struct otherwise.  Never held while
 *                      Python code runs or the library is called: only
 *                      around a few loads and stores.
 *   N4P_FT_LOAD / N4P_FT_STORE
 *                      an acquire load / release store of a word another
 *                      thread may write (a pointer published once its data
 *                      is written, a count of filled entries); a plain
 *                      access with a GIL.  On x86-64 and AArch64 the
 *                      acquire load is an ordinary load.
 *   N4P_FT_REF / N4P_FT_UNREF
 *                      take / drop a reference that only a free-threaded
 *                      build needs (another thread may drop the owner's);
 *                      nothing with a GIL.
 *   n4p_dict_get_ref   PyDict_GetItemRef (3.13+): a strong reference (1),
 *                      none (0), or an error (-1); the same for 3.10 to 3.12.
 *   n4p_dict_get_str_ref  PyDict_GetItemStringRef likewise.
 *   Py_BEGIN_CRITICAL_SECTION / Py_END_CRITICAL_SECTION
 *                      (3.13+: a per-object lock on a free-threaded build,
 *                      nothing with a GIL) defined as a block for 3.10 to
 *                      3.12.
 */
#ifndef NCCL4PY_FTCOMPAT_H
#define NCCL4PY_FTCOMPAT_H

#include <Python.h>

#ifdef Py_GIL_DISABLED
#define N4P_FREE_THREADED 1
typedef PyMutex n4p_mutex;
#define n4p_lock(m) PyMutex_Lock(m)
#define n4p_unlock(m) PyMutex_Unlock(m)
#define N4P_FT_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define N4P_FT_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define N4P_FT_REF(o) Py_INCREF(o)
#define N4P_FT_UNREF(o) Py_DECREF(o)
#else
#define N4P_FREE_THREADED 0
typedef struct {
    char unused;
} n4p_mutex;
#define n4p_lock(m) ((void)(m))
#define n4p_unlock(m) ((void)(m))
#define N4P_FT_LOAD(p) (*(p))
#define N4P_FT_STORE(p, v) ((void)(*(p) = (v)))
#define N4P_FT_REF(o) ((void)(o))
#define N4P_FT_UNREF(o) ((void)(o))
#endif

#if PY_VERSION_HEX < 0x030D0000
#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

static inline int
n4p_dict_get_ref(PyObject *d, PyObject *key, PyObject **out)
{
    *out = PyDict_GetItemWithError(d, key);
    if (*out == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(*out);
    return 1;
}

static inline int
n4p_dict_get_str_ref(PyObject *d, const char *key, PyObject **out)
{
    PyObject *k = PyUnicode_FromString(key);
    if (k == NULL) {
        *out = NULL;
        return -1;
    }
    int r = n4p_dict_get_ref(d, k, out);
    Py_DECREF(k);
    return r;
}
#else
#define n4p_dict_get_ref PyDict_GetItemRef
#define n4p_dict_get_str_ref PyDict_GetItemStringRef
#endif

#endif /* NCCL4PY_FTCOMPAT_H */
