/*
 * lazylib.c - a shared library opened on first use (see lazylib.h).
 */
#define _GNU_SOURCE
#include "bindings.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* Take the object's mutex with the GIL released: a thread that holds the
 * mutex may need the GIL (to run the discovery module). */
static void
lock(n4p_lazylib *lib)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&lib->lock);
    Py_END_ALLOW_THREADS
}

static void
unlock(n4p_lazylib *lib)
{
    pthread_mutex_unlock(&lib->lock);
}

/* A malloc'ed copy of a str in the filesystem encoding (round-trips
 * undecodable bytes), or NULL with an exception. */
static char *
fs_strdup(PyObject *s)
{
    PyObject *b = PyUnicode_EncodeFSDefault(s);
    if (b == NULL)
        return NULL;
    char *c = strdup(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    if (c == NULL)
        PyErr_NoMemory();
    return c;
}

static PyObject *
fs_str(const char *c)
{
    if (c == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(c);
}

static void
free_attempts(n4p_lazylib_attempt *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(a[i].label);
        free(a[i].candidate);
        free(a[i].error);
    }
    free(a);
}

/* (decision, candidates) from the discovery module, or NULL. */
static PyObject *
discover(const n4p_lazylib_spec *spec, PyObject **decision, PyObject **cands)
{
    PyObject *m = PyImport_ImportModule(spec->discovery);
    if (m == NULL)
        return NULL;
    PyObject *res = PyObject_CallMethod(m, "candidates", NULL);
    Py_DECREF(m);
    if (res == NULL)
        return NULL;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(res, 0)) || !PyList_Check(PyTuple_GET_ITEM(res, 1))) {
        Py_DECREF(res);
        PyErr_Format(PyExc_RuntimeError, "%s.candidates() returned a bad value", spec->discovery);
        return NULL;
    }
    *decision = PyTuple_GET_ITEM(res, 0);
    *cands = PyTuple_GET_ITEM(res, 1);
    return res;
}

/* dlopen the candidates in order until one loads, recording every attempt
 * (the last one is the one that loaded).  *handle is NULL when none loaded.
 * Returns 0, or -1 with an exception set. */
static int
open_first(PyObject *cands, void **handle, n4p_lazylib_attempt **out, size_t *nout)
{
    Py_ssize_t n = PyList_GET_SIZE(cands);
    n4p_lazylib_attempt *att = calloc(n ? (size_t)n : 1, sizeof *att);
    if (att == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t k = 0;
    *handle = NULL;
    for (Py_ssize_t i = 0; i < n && *handle == NULL; i++) {
        PyObject *label, *cand;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(cands, i), "UU:candidate", &label, &cand))
            goto fail;
        n4p_lazylib_attempt *a = &att[k++];
        if ((a->label = fs_strdup(label)) == NULL || (a->candidate = fs_strdup(cand)) == NULL)
            goto fail;
        char err[1024] = "";
        void *h;
        Py_BEGIN_ALLOW_THREADS
        dlerror();
        h = dlopen(a->candidate, RTLD_NOW | RTLD_GLOBAL);
        if (h == NULL) {
            const char *e = dlerror();
            snprintf(err, sizeof err, "%s", e ? e : "unknown dlopen error");
        }
        Py_END_ALLOW_THREADS
        if (h == NULL && (a->error = strdup(err)) == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        *handle = h;
    }
    *out = att;
    *nout = k;
    return 0;
fail:
    if (*handle != NULL)
        dlclose(*handle);
    *handle = NULL;
    free_attempts(att, k);
    return -1;
}

/* The file behind a dlopen handle, as the dynamic loader resolved it. */
static char *
resolved_path(void *handle, const char *fallback)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL &&
        lm->l_name[0] != '\0')
        return strdup(lm->l_name);
    return strdup(fallback);
}

static int
raise_not_found(n4p_lazylib *lib, PyObject *error_type)
{
    PyObject *lines = PyUnicode_FromString("");
    for (size_t i = 0; i < lib->nattempts && lines != NULL; i++) {
        const n4p_lazylib_attempt *a = &lib->attempts[i];
        PyObject *label = fs_str(a->label), *cand = fs_str(a->candidate), *err = fs_str(a->error);
        PyObject *line = label && cand && err
                             ? PyUnicode_FromFormat("%s  - %S: %S\n      %S", i ? "\n" : "",
                                                    label, cand, err)
                             : NULL;
        Py_XDECREF(label);
        Py_XDECREF(cand);
        Py_XDECREF(err);
        PyObject *joined = line ? PyUnicode_Concat(lines, line) : NULL;
        Py_XDECREF(line);
        Py_SETREF(lines, joined);
    }
    PyObject *decision = lines ? fs_str(lib->decision) : NULL;
    if (decision != NULL)
        PyErr_Format(error_type, "Could not load %s (%S). Tried, in order:\n%S\n%s",
                     lib->spec->what, decision, lines, lib->spec->advice);
    Py_XDECREF(decision);
    Py_XDECREF(lines);
    return -1;
}

/* Called with the GIL and the mutex held. */
static int
load_locked(n4p_lazylib *lib, PyObject *error_type)
{
    const n4p_lazylib_spec *spec = lib->spec;
    PyObject *decision, *cands;
    PyObject *res = discover(spec, &decision, &cands);
    if (res == NULL)
        return -1;
    char *dec = fs_strdup(decision);
    void *handle = NULL;
    n4p_lazylib_attempt *att = NULL;
    size_t natt = 0;
    int rc = dec ? open_first(cands, &handle, &att, &natt) : -1;
    Py_DECREF(res);
    if (rc < 0) {
        free(dec);
        return -1;
    }
    free(lib->decision);
    free_attempts(lib->attempts, lib->nattempts);
    lib->decision = dec;
    lib->attempts = att;
    lib->nattempts = natt;
    if (handle == NULL)
        return raise_not_found(lib, error_type);
    char *path = resolved_path(handle, att[natt - 1].candidate);
    if (path == NULL) {
        dlclose(handle);
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    lib->family = spec->family ? spec->family(handle, path) : 0;
    for (int i = 0; i < spec->nfns; i++) {
        void *p = NULL;
        for (const char *s = spec->symbols(lib->family, i); *s && p == NULL; s += strlen(s) + 1)
            p = dlsym(handle, s);
        lib->fns[i] = p;
    }
    Py_END_ALLOW_THREADS
    free(lib->path);
    lib->path = path;
    lib->handle = handle;
    if (spec->loaded != NULL)
        spec->loaded(lib);
    atomic_store_explicit(&lib->loaded, 1, memory_order_release);
    return 0;
}

int
n4p_lazylib_load(n4p_lazylib *lib, PyObject *error_type)
{
    if (n4p_lazylib_ready(lib))
        return 0;
    lock(lib);
    int rc = n4p_lazylib_ready(lib) ? 0 : load_locked(lib, error_type);
    unlock(lib);
    return rc;
}

const char *
n4p_lazylib_symbol(const n4p_lazylib *lib, int idx)
{
    return lib->spec->symbols(lib->family, idx);
}

const char *
n4p_lazylib_fallback(const n4p_lazylib *lib, int idx)
{
    const char *s = n4p_lazylib_symbol(lib, idx);
    return s + strlen(s) + 1;
}

void
n4p_lazylib_raise_missing(const n4p_lazylib *lib, PyObject *exc, int idx, const char *what)
{
    const char *sym = n4p_lazylib_symbol(lib, idx);
    const char *alt = n4p_lazylib_fallback(lib, idx);
    if (*alt)
        PyErr_Format(exc, "function %s is not found in %s%s (also tried %s)", sym, what,
                     lib->path, alt);
    else
        PyErr_Format(exc, "function %s is not found in %s%s", sym, what, lib->path);
}

PyObject *
n4p_lazylib_attempts(n4p_lazylib *lib)
{
    lock(lib);
    PyObject *out = NULL;
    if (lib->decision == NULL) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if ((out = PyList_New((Py_ssize_t)lib->nattempts)) == NULL)
        goto done;
    for (size_t i = 0; i < lib->nattempts; i++) {
        const n4p_lazylib_attempt *a = &lib->attempts[i];
        PyObject *t = Py_BuildValue("(NNN)", fs_str(a->label), fs_str(a->candidate),
                                    fs_str(a->error));
        if (t == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
done:
    unlock(lib);
    return out;
}

PyObject *
n4p_lazylib_decision(n4p_lazylib *lib)
{
    lock(lib);
    PyObject *r = fs_str(lib->decision);
    unlock(lib);
    return r;
}

PyObject *
n4p_lazylib_path(n4p_lazylib *lib)
{
    lock(lib);
    PyObject *r = fs_str(n4p_lazylib_ready(lib) ? lib->path : NULL);
    unlock(lib);
    return r;
}

PyObject *
n4p_lazylib_missing(n4p_lazylib *lib)
{
    PyObject *out = PyList_New(0);
    for (int i = 0; out != NULL && n4p_lazylib_ready(lib) && i < lib->spec->nfns; i++) {
        if (lib->fns[i] != NULL)
            continue;
        PyObject *s = PyUnicode_FromString(n4p_lazylib_symbol(lib, i));
        if (s == NULL || PyList_Append(out, s) < 0)
            Py_CLEAR(out);
        Py_XDECREF(s);
    }
    return out;
}

PyObject *
n4p_lazylib_load_error(n4p_lazylib *lib, PyObject *error_type, int any_error)
{
    if (n4p_lazylib_load(lib, error_type) == 0)
        Py_RETURN_NONE;
    if (!any_error && !PyErr_ExceptionMatches(error_type))
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : PyUnicode_FromString("unknown error");
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return text;
}
