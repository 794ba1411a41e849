/*
 * bindings.h - the one shared header of the nccl._nccl extension.
 *
 * Layout of the extension (one file per concept):
 *   module.c            module init, module state, method table
 *   loader.c            library discovery, dlopen, the function-pointer table
 *   args.c              Python -> C argument conversion and keyword parsing
 *   errors.c            NCCLError / FunctionNotFoundError / NotSupportedError
 *   structs.c           UniqueId, Config, SimInfo, ... (one generic struct type)
 *   pointerbox.c        PointerBox: stable storage for out-handles
 *   wrappers.c          hand-written wrappers (out-parameters, two conventions)
 *   gen/wrappers_simple.c  wrappers generated from the API table
 */
#ifndef NCCL4PY_BINDINGS_H
#define NCCL4PY_BINDINGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>

#include "nccl_api.h"
#include "gen/api_table.h"

/* ------------------------------------------------------------ module state */

enum n4p_struct_kind {
    N4P_S_UNIQUE_ID,
    N4P_S_CONFIG,
    N4P_S_SIM_INFO,
    N4P_S_COMM_PROPERTIES,
    N4P_S_WAIT_SIGNAL_DESC,
    N4P_S_DEV_COMM_REQUIREMENTS,
    N4P_S_DEV_COMM,
    N4P_S_COUNT
};

typedef struct {
    PyObject *nccl_error;          /* nccl._errors.NCCLError */
    PyObject *function_not_found;  /* nccl._errors.FunctionNotFoundError */
    PyObject *not_supported;       /* nccl._errors.NotSupportedError */
    PyTypeObject *struct_types[N4P_S_COUNT];
    PyTypeObject *pointer_box_type;
} n4p_state;

static inline n4p_state *
n4p_get_state(PyObject *mod)
{
    return (n4p_state *)PyModule_GetState(mod);
}

/* ------------------------------------------------------------------ loader */

extern void *n4p_fns[N4P_API_COUNT];
extern atomic_int n4p_loaded;

int n4p_load(PyObject *mod);                 /* 0 or -1 with exception */
void n4p_raise_missing(PyObject *mod, int idx);
PyObject *n4p_loader_report(PyObject *mod, PyObject *unused);
PyObject *n4p_get_library_path(PyObject *mod, PyObject *unused);
PyObject *n4p_api_table_list(PyObject *mod, PyObject *unused);

/* The function pointer for table entry idx, loading the library on first
 * use.  NULL with FunctionNotFoundError / NotSupportedError set otherwise. */
static inline void *
n4p_fn(PyObject *mod, int idx)
{
    if (!atomic_load_explicit(&n4p_loaded, memory_order_acquire) && n4p_load(mod) < 0)
        return NULL;
    void *p = n4p_fns[idx];
    if (p == NULL)
        n4p_raise_missing(mod, idx);
    return p;
}

/* -------------------------------------------------------------------- args */

/* Fill out[0..maxargs) from positional and keyword arguments (borrowed refs;
 * missing optional ones are NULL).  Returns the number of arguments given or
 * -1 with TypeError set. */
Py_ssize_t n4p_parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          const char *fname, const char *const *kw, Py_ssize_t minargs,
                          Py_ssize_t maxargs, PyObject **out);
/* Number of arguments given (positional + keyword). */
static inline Py_ssize_t
n4p_nargs_total(Py_ssize_t nargs, PyObject *kwnames)
{
    return nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
}

int n4p_arg_ptr(PyObject *o, const char *name, void **out);
int n4p_arg_size(PyObject *o, const char *name, size_t *out);
int n4p_arg_int(PyObject *o, const char *name, int *out);
int n4p_arg_uint(PyObject *o, const char *name, unsigned int *out);
/* Address of a non-NULL out-parameter slot given as an int. */
int n4p_arg_out_ptr(PyObject *o, const char *name, void **out);

/* A read-only byte view of at least `minlen` bytes of a buffer object, or an
 * address given as an int (view->obj is NULL then).  Release with
 * n4p_view_release. */
typedef struct {
    Py_buffer view;
    int have_view;
    void *ptr;
} n4p_bytes_arg;
int n4p_arg_bytes(PyObject *o, const char *name, Py_ssize_t minlen, int writable,
                  n4p_bytes_arg *out);
void n4p_bytes_release(n4p_bytes_arg *a);

/* An int array from a sequence of ints (copied, caller frees with PyMem_Free)
 * or an address given as an int (*owned = 0).  *len is the sequence length or
 * -1 for an address.  None gives NULL. */
int n4p_arg_int_array(PyObject *o, const char *name, int **out, Py_ssize_t *len, int *owned);
int n4p_arg_size_array(PyObject *o, const char *name, size_t **out, Py_ssize_t *len, int *owned);

/* ------------------------------------------------------------------ errors */

int n4p_init_errors(PyObject *mod, n4p_state *st);
/* Raise NCCLError(status); always returns NULL. */
PyObject *n4p_raise_status(PyObject *mod, ncclResult_t status);
/* None for Success/InProgress, else NCCLError. */
static inline PyObject *
n4p_status_none(PyObject *mod, ncclResult_t r)
{
    if (r == ncclSuccess || r == ncclInProgress)
        Py_RETURN_NONE;
    return n4p_raise_status(mod, r);
}
static inline int
n4p_status_failed(ncclResult_t r)
{
    return r != ncclSuccess && r != ncclInProgress;
}
PyObject *n4p_check_status(PyObject *mod, PyObject *arg);

/* ----------------------------------------------------------------- structs */

int n4p_init_structs(PyObject *mod, n4p_state *st);
/* New owned, initialised struct object of the given kind. */
PyObject *n4p_struct_new(n4p_state *st, int kind);
/* Pointer to the C struct inside an object of that kind, or NULL. */
void *n4p_struct_ptr(n4p_state *st, int kind, PyObject *o);
/* The C struct pointer for an argument: an object of that kind, an int
 * address (0 and None give NULL when allow_null). */
int n4p_arg_struct(n4p_state *st, int kind, PyObject *o, const char *name, int allow_null,
                   void **out);
PyObject *n4p_struct_layouts(PyObject *mod, PyObject *unused);

int n4p_init_pointer_box(PyObject *mod, n4p_state *st);

/* ---------------------------------------------------------------- wrappers */

extern PyMethodDef n4p_generated_methods[];
extern PyMethodDef n4p_wrapper_methods[];

#endif /* NCCL4PY_BINDINGS_H */
