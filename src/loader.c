/*
 * loader.c - the collective-communication library: the API table's lazy
 * library (see lazylib.h for the mechanism).
 *
 * The candidate list (which files, in which order, and why) is computed by
 * nccl/_discovery.py, because it depends on the environment, on installed
 * wheels and on ctypes.util.find_library.  The first call of a wrapper loads
 * the library and binds every API-table symbol (alternatives in order); a
 * missing symbol leaves a NULL pointer and the wrapper raises
 * FunctionNotFoundError when it is called.
 */
#define _GNU_SOURCE
#define N4P_DEFINE_API_TABLE /* this file owns the table's definition */
#include "bindings.h"

#include <dlfcn.h>
#include <string.h>

void *n4p_fns[N4P_API_COUNT];

static const char *const family_names[] = {"nccl", "rccl", "host"};

/* Which family the library belongs to: the host backend exports a marker;
 * otherwise the file name decides (librccl* / libnccl*), and for other names
 * RCCL's own symbol does. */
static int
library_family(void *handle, const char *path)
{
    if (dlsym(handle, "nccl4pyHostBackend") != NULL)
        return N4P_LIB_HOST;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strstr(base, "rccl") != NULL)
        return N4P_LIB_RCCL;
    if (strstr(base, "nccl") != NULL)
        return N4P_LIB_NCCL;
    return dlsym(handle, "ncclAllReduceWithBias") != NULL ? N4P_LIB_RCCL : N4P_LIB_NCCL;
}

static const char *
api_symbols(int Py_UNUSED(family), int idx)
{
    return n4p_api_table[idx].symbols;
}

/* The host backend waits for its peers with the GIL released and cannot
 * raise KeyboardInterrupt itself: while it waits it calls this (on the
 * waiting thread, about every 100 ms and as soon as a signal arrives), which
 * runs the pending Python signal handlers.  Nonzero when one raised (and as
 * long as that exception is pending): the backend then abandons the wait
 * and fails the call, and the exception the handler raised is what the
 * caller gets (see n4p_raise_status). */
static int
host_interrupt_check(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing())
#else
    if (_Py_IsFinalizing())
#endif
        return 0;
    if (PyGILState_GetThisThreadState() == NULL) /* not a Python thread */
        return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    /* a pending exception can only be one a handler raised during this call */
    int raised = PyErr_Occurred() != NULL || PyErr_CheckSignals() < 0;
    PyGILState_Release(g);
    return raised;
}

n4p_host_fns n4p_host;

/* The version code of a loaded NCCL newer than NCCL4PY_ABI_VERSION_CODE, the
 * newest whose layouts the tables hold (0: none such).  Its structs still
 * reach it in those layouts, stamped with that version (structs.c), which
 * NCCL reads as it reads an older caller's; n4p_load says so once. */
static int newer_nccl;
static atomic_int newer_reported;

static void
note_newer(n4p_lazylib *lib)
{
    ncclGetVersion_fn fn = (ncclGetVersion_fn)lib->fns[N4P_IDX_ncclGetVersion];
    if (lib->family != N4P_LIB_NCCL || fn == NULL)
        return;
    int v = 0;
    ncclResult_t r;
    Py_BEGIN_ALLOW_THREADS
    r = fn(&v);
    Py_END_ALLOW_THREADS
    newer_nccl = r == ncclSuccess && v > NCCL4PY_ABI_VERSION_CODE ? v : 0;
}

/* The once-per-process RuntimeWarning about a newer NCCL: 0, or -1 with the
 * exception a warnings filter made of it. */
static int
report_newer(void)
{
    int v = newer_nccl, k = NCCL4PY_ABI_VERSION_CODE;
    if (v == 0 || atomic_exchange(&newer_reported, 1))
        return 0;
    return PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                            "the loaded NCCL %d.%d.%d (%s) is newer than NCCL %d.%d.%d, the newest "
                            "whose struct layouts nccl4py knows: structs reach it in %d.%d.%d's "
                            "layouts, and fields it added are not available",
                            v / 10000, v / 100 % 100, v % 100, n4p_nccl.path, k / 10000,
                            k / 100 % 100, k % 100, k / 10000, k / 100 % 100, k % 100);
}

/* The host backend's own functions, from the loaded library only. */
static void
library_loaded(n4p_lazylib *lib)
{
    note_newer(lib);
    if (lib->family != N4P_LIB_HOST)
        return;
    *(void **)&n4p_host.set_interrupt_check = dlsym(lib->handle, "nccl4pyHostSetInterruptCheck");
    *(void **)&n4p_host.wait_state = dlsym(lib->handle, "nccl4pyHostWaitState");
    if (n4p_host.set_interrupt_check != NULL)
        n4p_host.set_interrupt_check(host_interrupt_check);
}

n4p_lazylib n4p_nccl = N4P_LAZYLIB(
    n4p_fns, "an NCCL or RCCL library", "nccl._discovery",
    "Set NCCL_LIBRARY to the library's path, install nvidia-nccl-cu12/cu13 or ROCm's RCCL, or use "
    "the bundled host backend with NCCL4PY_BACKEND=host.",
    library_family, api_symbols, library_loaded);

int
n4p_load(PyObject *mod)
{
    if (n4p_lazylib_load(&n4p_nccl, n4p_get_state(mod)->not_supported) < 0)
        return -1;
    return report_newer();
}

void
n4p_raise_missing(PyObject *mod, int idx)
{
    n4p_lazylib_raise_missing(&n4p_nccl, n4p_get_state(mod)->function_not_found, idx, "");
}

PyObject *
n4p_get_library_path(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    if (n4p_load(mod) < 0)
        return NULL;
    return n4p_lazylib_path(&n4p_nccl);
}

/* A report for diagnostics that never raises for a missing library. */
PyObject *
n4p_loader_report(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    PyObject *error = n4p_lazylib_load_error(&n4p_nccl, n4p_get_state(mod)->not_supported, 1);
    if (error == NULL)
        return NULL;
    int loaded = n4p_lazylib_ready(&n4p_nccl);
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:s,s:i,s:i}", "decision",
                         n4p_lazylib_decision(&n4p_nccl), "attempts",
                         n4p_lazylib_attempts(&n4p_nccl), "path", n4p_lazylib_path(&n4p_nccl),
                         "error", error, "missing", n4p_lazylib_missing(&n4p_nccl), "family",
                         loaded ? family_names[n4p_nccl.family] : NULL, "known_version",
                         NCCL4PY_ABI_VERSION_CODE, "newer_version", loaded ? newer_nccl : 0);
}

/* [(symbol, alternatives, python name, first version, resolved-or-None)] */
PyObject *
n4p_api_table_list(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    int loaded = n4p_lazylib_ready(&n4p_nccl);
    PyObject *out = PyList_New(N4P_API_COUNT);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < N4P_API_COUNT; i++) {
        const char *syms = n4p_api_table[i].symbols;
        PyObject *alts = PyList_New(0);
        if (alts == NULL)
            goto fail;
        for (const char *s = syms + strlen(syms) + 1; *s; s += strlen(s) + 1) {
            PyObject *a = PyUnicode_FromString(s);
            if (a == NULL || PyList_Append(alts, a) < 0) {
                Py_XDECREF(a);
                Py_DECREF(alts);
                goto fail;
            }
            Py_DECREF(a);
        }
        PyObject *avail = loaded ? PyBool_FromLong(n4p_fns[i] != NULL) : Py_NewRef(Py_None);
        PyObject *t = Py_BuildValue("(sNssN)", syms, alts, n4p_api_table[i].pyname,
                                    n4p_api_table[i].since, avail);
        if (t == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, t);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* "nccl", "rccl" or "host": the family of the loaded library (loads it). */
PyObject *
n4p_library_family(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    if (n4p_load(mod) < 0)
        return NULL;
    return PyUnicode_FromString(family_names[n4p_nccl.family]);
}
