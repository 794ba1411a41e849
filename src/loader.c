/*
 * loader.c - find, dlopen and bind the collective-communication library.
 *
 * The candidate list (which files, in which order, and why) is computed by
 * nccl/_discovery.py, because it depends on the environment, on installed
 * wheels and on ctypes.util.find_library.  Everything else happens here:
 *
 *   - loading is lazy (first wrapper call) and happens once per process;
 *   - it is thread-safe: one lock, taken with the GIL released, and a
 *     re-check under the lock; the fast path is a single atomic load;
 *   - every candidate is opened with RTLD_NOW | RTLD_GLOBAL, the first one
 *     that loads wins, and every failure's dlerror() is kept for the report;
 *   - each API-table symbol is looked up with dlsym in that library only;
 *     a missing symbol leaves a NULL pointer and the wrapper raises
 *     FunctionNotFoundError when it is called.
 */
#define _GNU_SOURCE
#define N4P_DEFINE_API_TABLE /* this file owns the table's definition */
#include "bindings.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

void *n4p_fns[N4P_API_COUNT];
atomic_int n4p_loaded;
int n4p_library_kind;

/* Process-wide loader state: a process has one set of loaded libraries, so
 * this is deliberately not per-module.  Only touched under g_lock. */
static PyThread_type_lock g_lock;
static void *g_handle;
static PyObject *g_path;      /* str: the loaded file as the dynamic loader saw it */
static PyObject *g_attempts;  /* list of (label, candidate, error-or-None) */
static PyObject *g_decision;  /* str: why this order was chosen */

static PyObject *
call_discovery(void)
{
    PyObject *m = PyImport_ImportModule("nccl._discovery");
    if (m == NULL)
        return NULL;
    PyObject *res = PyObject_CallMethod(m, "candidates", NULL);
    Py_DECREF(m);
    if (res != NULL && (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2 ||
                        !PyList_Check(PyTuple_GET_ITEM(res, 1)))) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_RuntimeError, "nccl._discovery.candidates() returned a bad value");
        return NULL;
    }
    return res;
}

/* The file behind a dlopen handle, as the dynamic loader resolved it. */
static PyObject *
loaded_path(void *handle)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL &&
        lm->l_name[0] != '\0')
        return PyUnicode_DecodeFSDefault(lm->l_name);
    return NULL;
}

PyObject *
n4p_dlopen_first(PyObject *cands, void **handle, PyObject **path)
{
    *handle = NULL;
    *path = NULL;
    PyObject *attempts = PyList_New(0);
    if (attempts == NULL)
        return NULL;
    PyObject *loaded_from = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cands) && *handle == NULL; i++) {
        PyObject *label, *cand, *bytes = NULL;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(cands, i), "UU:candidate", &label, &cand) ||
            !PyUnicode_FSConverter(cand, &bytes))
            goto fail;
        const char *cpath = PyBytes_AS_STRING(bytes);
        char err[1024] = "";
        void *h;
        Py_BEGIN_ALLOW_THREADS
        dlerror();
        h = dlopen(cpath, RTLD_NOW | RTLD_GLOBAL);
        if (h == NULL) {
            const char *e = dlerror();
            snprintf(err, sizeof err, "%s", e ? e : "unknown dlopen error");
        }
        Py_END_ALLOW_THREADS
        Py_DECREF(bytes);
        PyObject *errobj = h ? Py_NewRef(Py_None) : PyUnicode_DecodeFSDefault(err);
        PyObject *t = errobj ? PyTuple_Pack(3, label, cand, errobj) : NULL;
        Py_XDECREF(errobj);
        if (t == NULL || PyList_Append(attempts, t) < 0) {
            Py_XDECREF(t);
            if (h != NULL)
                dlclose(h);
            goto fail;
        }
        Py_DECREF(t);
        *handle = h;
        loaded_from = cand;
    }
    if (*handle != NULL) {
        *path = loaded_path(*handle);
        if (*path == NULL) {
            PyErr_Clear();
            *path = Py_NewRef(loaded_from);
        }
    }
    return attempts;
fail:
    Py_DECREF(attempts);
    return NULL;
}

static void
bind_symbols(void *handle)
{
    for (int i = 0; i < N4P_API_COUNT; i++) {
        void *p = NULL;
        /* alternatives are NUL-separated, the list ends with an empty name */
        for (const char *s = n4p_api_table[i].symbols; *s && p == NULL; s += strlen(s) + 1) {
            dlerror();
            p = dlsym(handle, s);
        }
        n4p_fns[i] = p;
    }
}

/* Which family the library belongs to: the host backend exports a marker;
 * otherwise the file name decides (librccl* / libnccl*), and for other names
 * RCCL's own symbol does. */
static int
library_kind(void *handle, PyObject *path)
{
    if (dlsym(handle, "nccl4pyHostBackend") != NULL)
        return N4P_LIB_HOST;
    const char *p = path ? PyUnicode_AsUTF8(path) : NULL;
    if (p == NULL)
        PyErr_Clear();
    const char *base = p ? strrchr(p, '/') : NULL;
    base = base ? base + 1 : (p ? p : "");
    if (strstr(base, "rccl") != NULL)
        return N4P_LIB_RCCL;
    if (strstr(base, "nccl") != NULL)
        return N4P_LIB_NCCL;
    return dlsym(handle, "ncclAllReduceWithBias") != NULL ? N4P_LIB_RCCL : N4P_LIB_NCCL;
}

static int
raise_not_found(PyObject *mod, PyObject *decision, PyObject *attempts)
{
    n4p_state *st = n4p_get_state(mod);
    PyObject *lines = PyList_New(0);
    if (lines == NULL)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(attempts);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(attempts, i);
        PyObject *line = PyUnicode_FromFormat("  - %S: %S\n      %S", PyTuple_GET_ITEM(t, 0),
                                              PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2));
        if (line == NULL || PyList_Append(lines, line) < 0) {
            Py_XDECREF(line);
            Py_DECREF(lines);
            return -1;
        }
        Py_DECREF(line);
    }
    PyObject *sep = PyUnicode_FromString("\n");
    PyObject *body = sep ? PyUnicode_Join(sep, lines) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(lines);
    if (body == NULL)
        return -1;
    PyObject *msg = PyUnicode_FromFormat(
        "Could not load an NCCL or RCCL library (%S). Tried, in order:\n%S\n"
        "Set NCCL_LIBRARY to the library's path, install nvidia-nccl-cu12/cu13 or ROCm's "
        "RCCL, or use the bundled host backend with NCCL4PY_BACKEND=host.",
        decision, body);
    Py_DECREF(body);
    if (msg == NULL)
        return -1;
    PyErr_SetObject(st->not_supported, msg);
    Py_DECREF(msg);
    return -1;
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

/* Called with the GIL held and g_lock held. */
static int
load_locked(PyObject *mod)
{
    PyObject *res = call_discovery();
    if (res == NULL)
        return -1;
    PyObject *decision = PyTuple_GET_ITEM(res, 0);
    PyObject *cands = PyTuple_GET_ITEM(res, 1);
    void *handle;
    PyObject *path;
    PyObject *attempts = n4p_dlopen_first(cands, &handle, &path);
    if (attempts == NULL) {
        Py_DECREF(res);
        return -1;
    }
    Py_XSETREF(g_attempts, attempts);
    Py_XSETREF(g_decision, Py_NewRef(decision));
    Py_DECREF(res);
    if (handle == NULL)
        return raise_not_found(mod, g_decision, g_attempts);
    Py_XSETREF(g_path, path);
    Py_BEGIN_ALLOW_THREADS
    bind_symbols(handle);
    Py_END_ALLOW_THREADS
    g_handle = handle;
    n4p_library_kind = library_kind(handle, g_path);
    if (n4p_library_kind == N4P_LIB_HOST) {
        void (*set_check)(int (*)(void));
        *(void **)&set_check = dlsym(handle, "nccl4pyHostSetInterruptCheck");
        if (set_check != NULL)
            set_check(host_interrupt_check);
    }
    atomic_store_explicit(&n4p_loaded, 1, memory_order_release);
    return 0;
}

int
n4p_load(PyObject *mod)
{
    if (g_lock == NULL) {
        /* first use; the GIL serialises this allocation */
        g_lock = PyThread_allocate_lock();
        if (g_lock == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(g_lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    int rc = 0;
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire))
        rc = load_locked(mod);
    PyThread_release_lock(g_lock);
    return rc;
}

void
n4p_raise_missing(PyObject *mod, int idx)
{
    n4p_state *st = n4p_get_state(mod);
    const char *syms = n4p_api_table[idx].symbols;
    const char *alt = syms + strlen(syms) + 1;
    if (*alt)
        PyErr_Format(st->function_not_found,
                     "function %s is not found in %S (also tried %s)", syms,
                     g_path ? g_path : Py_None, alt);
    else
        PyErr_Format(st->function_not_found, "function %s is not found in %S", syms,
                     g_path ? g_path : Py_None);
}

PyObject *
n4p_get_library_path(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire) && n4p_load(mod) < 0)
        return NULL;
    return Py_NewRef(g_path);
}

/* A report for diagnostics that never raises for a missing library. */
PyObject *
n4p_loader_report(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    PyObject *error = Py_NewRef(Py_None);
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire) && n4p_load(mod) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        Py_SETREF(error, value ? PyObject_Str(value) : PyUnicode_FromString("unknown error"));
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        if (error == NULL)
            return NULL;
    }
    PyObject *missing = PyList_New(0);
    if (missing == NULL)
        goto fail;
    if (atomic_load_explicit(&n4p_loaded, memory_order_acquire)) {
        for (int i = 0; i < N4P_API_COUNT; i++) {
            if (n4p_fns[i] != NULL)
                continue;
            PyObject *s = PyUnicode_FromString(n4p_api_table[i].symbols);
            if (s == NULL || PyList_Append(missing, s) < 0) {
                Py_XDECREF(s);
                goto fail;
            }
            Py_DECREF(s);
        }
    }
    static const char *const kinds[] = {"nccl", "rccl", "host"};
    int loaded = atomic_load_explicit(&n4p_loaded, memory_order_acquire);
    PyObject *r = Py_BuildValue("{s:O,s:O,s:O,s:O,s:O,s:s}", "decision",
                                g_decision ? g_decision : Py_None, "attempts",
                                g_attempts ? g_attempts : Py_None, "path",
                                g_path ? g_path : Py_None, "error", error, "missing", missing,
                                "family", loaded ? kinds[n4p_library_kind] : NULL);
    Py_DECREF(error);
    Py_DECREF(missing);
    return r;
fail:
    Py_DECREF(error);
    Py_XDECREF(missing);
    return NULL;
}

/* [(symbol, alternatives, python name, first version, resolved-or-None)] */
PyObject *
n4p_api_table_list(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    int loaded = atomic_load_explicit(&n4p_loaded, memory_order_acquire);
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
    static const char *const kinds[] = {"nccl", "rccl", "host"};
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire) && n4p_load(mod) < 0)
        return NULL;
    return PyUnicode_FromString(kinds[n4p_library_kind]);
}
