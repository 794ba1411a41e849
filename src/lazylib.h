/*
 * lazylib.h - a shared library opened on first use: the one loading
 * mechanism behind the NCCL/RCCL library (loader.c) and the GPU runtime
 * (gpu_runtime.c).
 *
 * A Python discovery module's candidates() says what to try:
 * (decision, [(label, path-or-soname), ...]).  The first candidate that
 * dlopen()s (RTLD_NOW | RTLD_GLOBAL) wins; every attempt and its dlerror()
 * is kept for the report and for the error when none loads.  Then the
 * library's family is decided and the symbol table of that family is bound
 * with dlsym (a missing symbol leaves NULL).
 *
 * Loading happens once per process, under the object's mutex, which is
 * taken with the GIL released (the discovery module runs with both held).
 * The fast path is one atomic load.  What the object keeps (path, decision,
 * attempts) is C data: a process has one set of loaded libraries, whatever
 * the number of interpreters or module objects.
 */
#ifndef NCCL4PY_LAZYLIB_H
#define NCCL4PY_LAZYLIB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef struct n4p_lazylib n4p_lazylib;

typedef struct {
    const char *what;       /* in messages: "an NCCL or RCCL library" */
    const char *discovery;  /* module whose candidates() lists what to try */
    const char *advice;     /* last line of the error when nothing loads */
    int nfns;               /* number of symbols in the table */
    /* The family of the opened library (0 when there is only one); called
     * without the GIL. */
    int (*family)(void *handle, const char *path);
    /* Symbol idx of a family: alternatives separated by NUL, ending with an
     * empty name. */
    const char *(*symbols)(int family, int idx);
    /* Optional, with the GIL held, once the symbols are bound. */
    void (*loaded)(n4p_lazylib *lib);
} n4p_lazylib_spec;

typedef struct {
    char *label, *candidate, *error; /* error is NULL for the one that loaded */
} n4p_lazylib_attempt;

struct n4p_lazylib {
    const n4p_lazylib_spec *spec;
    void **fns;              /* spec->nfns function pointers */
    atomic_int loaded;       /* 1 once fns is bound */
    pthread_mutex_t lock;    /* held while loading and while reporting */
    void *handle;
    int family;
    char *path;              /* the file as the dynamic loader resolved it */
    char *decision;          /* why these candidates (NULL before a try) */
    n4p_lazylib_attempt *attempts;
    size_t nattempts;
};

/* The initialiser of a lazy library: its symbol table `fns_` (an array of
 * void *, whose length is the number of symbols) and the facts of its spec
 * in the order of n4p_lazylib_spec (`loaded_` may be NULL):
 *
 *   static void *fns[COUNT];
 *   static n4p_lazylib lib = N4P_LAZYLIB(fns, "a ... library", "nccl._module",
 *                                        "Install ...", family, symbols, NULL);
 *
 * The spec is a compound literal at file scope, so it is static. */
#define N4P_LAZYLIB(fns_, what_, discovery_, advice_, family_, symbols_, loaded_) \
    {.spec = &(const n4p_lazylib_spec){.what = (what_),                           \
                                       .discovery = (discovery_),                 \
                                       .advice = (advice_),                       \
                                       .nfns = N4P_LAZYLIB_COUNT(fns_),           \
                                       .family = (family_),                       \
                                       .symbols = (symbols_),                     \
                                       .loaded = (loaded_)},                      \
     .fns = (fns_),                                                               \
     .lock = PTHREAD_MUTEX_INITIALIZER}

/* The length of a symbol table; a pointer instead of an array does not
 * compile (no _Generic association matches it). */
#define N4P_LAZYLIB_COUNT(fns_)                                \
    _Generic(&(fns_), void *(*)[sizeof(fns_) / sizeof(void *)] \
             : (int)(sizeof(fns_) / sizeof(void *)))

/* Load the library if it is not loaded yet: 0, or -1 with an exception
 * (`error_type` when no candidate loads). */
int n4p_lazylib_load(n4p_lazylib *lib, PyObject *error_type);

static inline int
n4p_lazylib_ready(n4p_lazylib *lib)
{
    return atomic_load_explicit(&lib->loaded, memory_order_acquire);
}

/* The first name of symbol idx in the loaded family, and its fallback ("" if
 * none). */
const char *n4p_lazylib_symbol(const n4p_lazylib *lib, int idx);
const char *n4p_lazylib_fallback(const n4p_lazylib *lib, int idx);
/* Raise exc: symbol idx is not in the loaded library, which the message
 * calls `what` followed by its path ("" for the path alone). */
void n4p_lazylib_raise_missing(const n4p_lazylib *lib, PyObject *exc, int idx, const char *what);

/* For reports (new references; they never load):
 * the attempts as [(label, candidate, error-or-None)] or None before a try,
 * the decision and the path as str or None, the symbols missing from the
 * loaded library as a list (empty when not loaded). */
PyObject *n4p_lazylib_attempts(n4p_lazylib *lib);
PyObject *n4p_lazylib_decision(n4p_lazylib *lib);
PyObject *n4p_lazylib_path(n4p_lazylib *lib);
PyObject *n4p_lazylib_missing(n4p_lazylib *lib);

/* Load for a report: None when the library is loaded, else the text of the
 * error.  An exception of another type than `error_type` propagates unless
 * any_error is set. */
PyObject *n4p_lazylib_load_error(n4p_lazylib *lib, PyObject *error_type, int any_error);

#endif /* NCCL4PY_LAZYLIB_H */
