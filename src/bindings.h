/*
 * bindings.h - the one shared header of the nccl._nccl extension.
 *
 * Layout of the extension (one file per concept):
 *   module.c            module init, module state, method table
 *   lazylib.c           a library opened on first use (the loaders' mechanism)
 *   loader.c            the NCCL/RCCL library: the API table's lazy library
 *   args.c              Python -> C argument conversion and keyword parsing
 *   errors.c            NCCLError / FunctionNotFoundError / NotSupportedError
 *   structs.c           UniqueId, Config, SimInfo, ... (one generic struct type)
 *   pointerbox.c        PointerBox: stable storage for out-handles
 *   handles.c           Comm and Window: handle objects with their own slot
 *   group.c             group depth and the keep list of grouped calls
 *   wrappers.c          the hand-written wrappers that are no pattern
 *   gpu_runtime.c       the dlopen'd HIP/CUDA runtime layer (table: gpu_runtime.def)
 *   gen/wrappers.c      the wrappers and the method table generated from the API
 *                       table (src/nccl_api.def; see src/README.md)
 */
#ifndef NCCL4PY_BINDINGS_H
#define NCCL4PY_BINDINGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>

#include "nccl_api.h"
#include "gen/api_table.h"

/* ------------------------------------------------------------ module state */

/* The struct types (structs.def): N4P_S_CONFIG, ... */
enum n4p_struct_kind {
#define N4P_STRUCT(Type, PyName, KIND, picklable) N4P_S_##KIND,
#define N4P_OPAQUE(Type, PyName, KIND, picklable) N4P_S_##KIND,
#define N4P_UNION(Type, PyName, KIND, picklable) N4P_S_##KIND,
#include "structs.def"
    N4P_S_COUNT
};

/* handles.c: the handle object types, in the order of their specs. */
enum n4p_handle_kind { N4P_H_COMM, N4P_H_WINDOW, N4P_H_COUNT };

/* ndarray_fast.c: the numpy.ndarray fast path of buffer resolution
 * (ndarray_fast.h), per module state. */
#define N4P_NDARRAY_TYPES 32 /* NumPy's built-in type numbers are below this */
typedef struct {
    PyTypeObject *type; /* numpy.ndarray once its layout passed the check (strong ref) */
    int tried;          /* the check has run (or is running) */
    signed char dtype_of[N4P_NDARRAY_TYPES]; /* NumPy type number -> NCCL dtype + 1; 0: none */
    const char *off;    /* why the fast path is off (static text); NULL when on or not tried */
} n4p_ndarray_fast;

typedef struct {
    PyObject *nccl_error;          /* nccl._errors.NCCLError */
    PyObject *timeout_error;       /* nccl._errors.NcclTimeoutError (trace.c) */
    PyObject *function_not_found;  /* nccl._errors.FunctionNotFoundError */
    PyObject *not_supported;       /* nccl._errors.NotSupportedError */
    PyObject *nccl_invalid;        /* nccl._errors.NcclInvalid */
    PyTypeObject *struct_types[N4P_S_COUNT];
    PyTypeObject *pointer_box_type;
    PyTypeObject *handle_types[N4P_H_COUNT]; /* Comm, Window */
    PyTypeObject *comm_base_type;  /* communicator.c */
    /* buffer.c / stream.c: per-type caches and interned names */
    PyObject *buffer_kinds;        /* dict: type -> int kind */
    PyObject *last_buffer_type;    /* the type resolved last (strong ref) ... */
    PyObject *last_buffer_kind;    /* ... and its buffer_kinds value (strong ref) */
    /* torch.Tensor's own accessors of what a tensor means beyond its memory,
     * taken from its C base type when the first tensor type is classified */
    PyObject *torch_is_neg;        /* method descriptor TensorBase.is_neg */
    PyObject *torch_is_conj;       /* method descriptor TensorBase.is_conj */
    PyObject *torch_requires_grad; /* getset descriptor TensorBase.requires_grad */
    n4p_ndarray_fast ndarray;      /* ndarray_fast.c */
    PyObject *stream_kinds;        /* dict: type -> int kind */
    PyObject *str_dlpack;          /* "__dlpack__" */
    PyObject *str_dlpack_device;   /* "__dlpack_device__" */
    PyObject *str_cai;             /* "__cuda_array_interface__" */
    PyObject *str_array_interface; /* "__array_interface__" */
    PyObject *str_cuda_stream;     /* "__cuda_stream__" */
    PyObject *str_lowpp;           /* "_lowpp" (communicator.c: config=) */
    PyObject *str_config;          /* "config" (communicator.c: config=None) */
    PyObject *str_comm;            /* "_comm" (communicator.c: the op's communicator) */
    PyObject *dlpack_kwnames;      /* ("stream", "max_version") */
    PyObject *dlpack_max_version;  /* (1, 1) */
    PyObject *gpu_runtime_error;   /* gpu_runtime.c: GpuRuntimeError */
} n4p_state;

static inline n4p_state *
n4p_get_state(PyObject *mod)
{
    return (n4p_state *)PyModule_GetState(mod);
}

/* ------------------------------------------------------------------ loader */

#include "lazylib.h"

/* The NCCL/RCCL library (loader.c): the lazy library of the API table. */
extern n4p_lazylib n4p_nccl;
extern void *n4p_fns[N4P_API_COUNT]; /* its function pointers, by N4P_IDX_* */
#define n4p_loaded (n4p_nccl.loaded)
/* Family of the loaded library (valid once n4p_loaded is set). */
enum { N4P_LIB_NCCL = 0, N4P_LIB_RCCL = 1, N4P_LIB_HOST = 2 };
#define n4p_library_kind (n4p_nccl.family)

int n4p_load(PyObject *mod);                 /* 0 or -1 with exception */
void n4p_raise_missing(PyObject *mod, int idx);
PyObject *n4p_loader_report(PyObject *mod, PyObject *unused);
PyObject *n4p_get_library_path(PyObject *mod, PyObject *unused);
PyObject *n4p_library_family(PyObject *mod, PyObject *unused);
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

/* Assign `r = expr` with the GIL released: every library call goes through it. */
#define CALL(expr)                                                                             \
    do {                                                                                       \
        Py_BEGIN_ALLOW_THREADS r = (expr);                                                     \
        Py_END_ALLOW_THREADS                                                                   \
    } while (0)

/* -------------------------------------------------------------------- args */

/* Fill out[0..maxargs) from positional and keyword arguments (borrowed refs;
 * missing optional ones are NULL).  Returns the number of arguments given or
 * -1 with TypeError set. */
Py_ssize_t n4p_parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          const char *fname, const char *const *kw, Py_ssize_t minargs,
                          Py_ssize_t maxargs, PyObject **out);
/* The most parameters a library function has (n4p_parse_args_out). */
#define N4P_MAX_ARGS 16
/* Like n4p_parse_args for a wrapper with an optional out-argument at index
 * `opt` that is not the last one (the calling conventions): all n arguments
 * given -> 1; n - 1 given -> the others are parsed without it, out[opt] is
 * NULL and 0 is returned; -1 with TypeError set otherwise. */
int n4p_parse_args_out(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       const char *fname, const char *const *kw, Py_ssize_t n, Py_ssize_t opt,
                       PyObject **out);
/* Number of arguments given (positional + keyword). */
static inline Py_ssize_t
n4p_nargs_total(Py_ssize_t nargs, PyObject *kwnames)
{
    return nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
}

int n4p_arg_ptr_slow(PyObject *o, const char *name, void **out);
int n4p_arg_size_slow(PyObject *o, const char *name, size_t *out);
int n4p_arg_int_slow(PyObject *o, const char *name, int *out);
int n4p_arg_uint_slow(PyObject *o, const char *name, unsigned int *out);

/* The converters' fast paths are forced inline into every wrapper, so that
 * the hot call is straight-line code; everything else, and every error
 * message, is in out-of-line functions (args.c). */
#if defined(__GNUC__) || defined(__clang__)
#define N4P_HOT_INLINE static inline __attribute__((always_inline))
#define N4P_COLD __attribute__((noinline, cold))
#define N4P_LIKELY(x) __builtin_expect(!!(x), 1)
#define N4P_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define N4P_HOT_INLINE static inline
#define N4P_COLD
#define N4P_LIKELY(x) (x)
#define N4P_UNLIKELY(x) (x)
#endif

/* The value of an int the inline digit check below does not cover: 1 and
 * *v set when it fits in a long long, 0 (no exception) otherwise. */
N4P_COLD int n4p_long_value(PyObject *o, long long *v);

/* Fast path of the converters: an int (or subclass: IntEnum members) that
 * fits in a long long (the common case, also for addresses below 2**63): 1
 * and *v set; 0 (no exception) for anything else, which the slow
 * converters then handle. */
N4P_HOT_INLINE int
n4p_small_int(PyObject *o, long long *v)
{
    if (N4P_UNLIKELY(!PyLong_Check(o)))
        return 0;
#if PYLONG_BITS_IN_DIGIT == 30
    /* Up to two 30-bit digits (|value| < 2**60: sizes, ints and the
     * addresses of user space) straight from the digits, as CPython's own
     * inline helpers do; the rest through the C API. */
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)o)) {
        *v = (long long)PyUnstable_Long_CompactValue((PyLongObject *)o);
        return 1;
    }
#ifdef _PyLong_NON_SIZE_BITS
    uintptr_t tag = ((PyLongObject *)o)->long_value.lv_tag;
    if ((tag >> _PyLong_NON_SIZE_BITS) == 2) {
        const digit *d = ((PyLongObject *)o)->long_value.ob_digit;
        long long x = (long long)d[0] | ((long long)d[1] << PyLong_SHIFT);
        *v = (tag & _PyLong_SIGN_MASK) == 2 ? -x : x;
        return 1;
    }
#endif
#else
    /* compares, not a switch: a jump table costs an indirect branch */
    const digit *d = ((PyLongObject *)o)->ob_digit;
    Py_ssize_t n = Py_SIZE(o);
    if (N4P_LIKELY(n == 1 || n == 2)) {
        long long x = (long long)d[0];
        if (n == 2)
            x |= (long long)d[1] << PyLong_SHIFT;
        *v = x;
        return 1;
    }
    if (n == 0) {
        *v = 0;
        return 1;
    }
    /* negative values (rare) out of line */
#endif
#endif
    return n4p_long_value(o, v);
}

N4P_HOT_INLINE int
n4p_arg_ptr(PyObject *o, const char *name, void **out)
{
    long long v;
    if (N4P_LIKELY(n4p_small_int(o, &v))) {
        *out = (void *)(intptr_t)v;
        return 0;
    }
    return n4p_arg_ptr_slow(o, name, out);
}

N4P_HOT_INLINE int
n4p_arg_size(PyObject *o, const char *name, size_t *out)
{
    long long v;
    if (N4P_LIKELY(n4p_small_int(o, &v) && v >= 0)) {
        *out = (size_t)v;
        return 0;
    }
    return n4p_arg_size_slow(o, name, out);
}

N4P_HOT_INLINE int
n4p_arg_int(PyObject *o, const char *name, int *out)
{
    long long v;
    if (N4P_LIKELY(n4p_small_int(o, &v) && v >= INT_MIN && v <= INT_MAX)) {
        *out = (int)v;
        return 0;
    }
    return n4p_arg_int_slow(o, name, out);
}

N4P_HOT_INLINE int
n4p_arg_uint(PyObject *o, const char *name, unsigned int *out)
{
    long long v;
    if (N4P_LIKELY(n4p_small_int(o, &v) && v >= 0 && v <= (long long)UINT_MAX)) {
        *out = (unsigned int)v;
        return 0;
    }
    return n4p_arg_uint_slow(o, name, out);
}
/* Address of a non-NULL out-parameter slot given as an int. */
int n4p_arg_out_ptr(PyObject *o, const char *name, void **out);

/* A handle object (handles.c): one pointer-sized slot.  Each kind has its
 * own tp_hash, which its subclasses inherit: comparing it identifies the
 * kind without the module state. */
typedef struct {
    PyObject_HEAD
    void **slot;     /* where the handle is: &own, or a cell of its own (handles.c) */
    void *owner;     /* a Window: the communicator it was registered on (NULL: unknown) */
    void *own;
    int lent;        /* the library may still write the cell after the object is gone */
} n4p_handleobj;
Py_hash_t n4p_comm_hash(PyObject *self);
Py_hash_t n4p_window_hash(PyObject *self);

/* A handle of the given kind: an int or a handle object of that kind (its
 * slot's value) inline; an __index__ object, and the TypeError for the
 * other kind of handle object, out of line. */
int n4p_arg_handle_slow(PyObject *o, const char *name, enum n4p_handle_kind kind, void **out);
N4P_HOT_INLINE int
n4p_arg_handle(PyObject *o, const char *name, enum n4p_handle_kind kind, void **out)
{
    long long v;
    if (Py_TYPE(o)->tp_hash == (kind == N4P_H_COMM ? n4p_comm_hash : n4p_window_hash)) {
        *out = *((n4p_handleobj *)o)->slot;
        return 0;
    }
    if (N4P_LIKELY(n4p_small_int(o, &v))) {
        *out = (void *)(intptr_t)v;
        return 0;
    }
    return n4p_arg_handle_slow(o, name, kind, out);
}
N4P_HOT_INLINE int
n4p_arg_comm(PyObject *o, const char *name, void **out)
{
    return n4p_arg_handle(o, name, N4P_H_COMM, out);
}
N4P_HOT_INLINE int
n4p_arg_win(PyObject *o, const char *name, void **out)
{
    return n4p_arg_handle(o, name, N4P_H_WINDOW, out);
}

/* The address of a struct: an int, or an object with an int `.ptr` (a
 * struct object).  _opt: None and 0 give NULL; plain: 0 gives NULL, None is
 * a TypeError; storage (the library writes there): neither None nor 0. */
int n4p_arg_addr_opt(PyObject *o, const char *name, void **out);
int n4p_arg_addr(PyObject *o, const char *name, void **out);
int n4p_arg_storage(PyObject *o, const char *name, void **out);
/* Structs passed by value.  A team: a (n_ranks, rank, stride) tuple (Team
 * is one), an object with those int attributes, or the non-zero address of
 * an ncclTeam_t.  A multimem handle: a (mc_base_ptr,) tuple, an object with
 * an int .mc_base_ptr, or the non-zero address of an ncclMultimemHandle_t. */
int n4p_arg_team(PyObject *o, const char *name, ncclTeam_t *out);
int n4p_arg_multimem(PyObject *o, const char *name, ncclMultimemHandle_t *out);
/* A NUL-terminated string borrowed from a str (UTF-8) or bytes argument
 * (valid while the argument is); an embedded NUL is a ValueError. */
int n4p_arg_cstr(PyObject *o, const char *name, const char **out);

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

/* An array argument whose length is another argument (`name[len]` in the
 * table).  ptr is what the library gets; release with n4p_array_release
 * (also after a failed conversion). */
typedef struct {
    void *ptr;
    void *owned;           /* PyMem block holding a copy, or NULL */
    n4p_bytes_arg bytes;   /* a borrowed buffer, or none */
} n4p_array_arg;
void n4p_array_release(n4p_array_arg *a);
/* n ints: a sequence of exactly n ints (copied), an address, or None (NULL);
 * nname names the length argument in messages. */
int n4p_arg_int_array_n(PyObject *o, const char *name, int n, const char *nname,
                        n4p_array_arg *out);
/* n items of `size` bytes: a list or tuple of exactly n items, or one buffer
 * or address holding them all.  An item is an object of struct kind
 * `struct_kind`, or (struct_kind < 0) a buffer of exactly `size` bytes or an
 * address. */
int n4p_arg_items(n4p_state *st, PyObject *o, const char *name, int n, const char *nname,
                  size_t size, int struct_kind, n4p_array_arg *out);

/* A unique id passed by value: 128 bytes (a buffer) or their address. */
int n4p_arg_uid(PyObject *o, const char *name, ncclUniqueId *out);
/* A unique id passed by address: None or 0 give NULL, another int is the
 * address, a buffer is copied to *store. */
int n4p_arg_uid_opt(PyObject *o, const char *name, ncclUniqueId *store, const ncclUniqueId **out);

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

/* ------------------------------------------------------- buffers, streams */

/* DLPack device types (dlpack.h DLDeviceType) */
enum {
    N4P_DEV_CPU = 1,
    N4P_DEV_CUDA = 2,
    N4P_DEV_CUDA_HOST = 3,
    N4P_DEV_ROCM = 10,
    N4P_DEV_ROCM_HOST = 11,
    N4P_DEV_CUDA_MANAGED = 13,
};

/* A resolved buffer argument.  The public fields are filled by
 * n4p_buffer_resolve; the rest is private to buffer.c and released by
 * n4p_buffer_release (always call it after a successful resolve, once the
 * library call has been made). */
typedef struct {
    void *ptr;        /* address of the first element (data + byte_offset) */
    size_t count;     /* number of elements */
    int dtype;        /* ncclDataType_t */
    int device_type;  /* DLPack device type, N4P_DEV_* */
    int device_id;    /* 0 for host memory */
    int readonly;
    /* private */
    int how;          /* which path filled it */
    int have_view;
    Py_buffer view;
    void *managed;    /* DLManagedTensor[Versioned] whose deleter runs at release */
    int versioned;
    PyObject *ref;    /* strong reference held until release */
} n4p_buffer;

/* n4p_buffer_resolve's flags: the library writes into the buffer (read-only
 * memory, and tensors autograd tracks, are refused); the same object was
 * resolved for this call already (what only depends on the object, torch's
 * view bits, is not asked again); the general path only, never the
 * numpy.ndarray fast path (ndarray_fast.h: its check, and the tests that
 * compare the two). */
enum { N4P_BUF_WRITABLE = 1, N4P_BUF_AGAIN = 2, N4P_BUF_GENERAL = 4 };

/* Resolve `obj` given for argument `name` (used in error messages), with
 * N4P_BUF_* flags.
 * Accepts DLPack producers (C exchange API, __dlpack__ versioned/legacy),
 * the buffer protocol, __array_interface__ (ml_dtypes arrays),
 * __cuda_array_interface__ v3, and explicit specs (buf, count),
 * (buf, dtype), (buf, count, dtype).  Memory whose order is not its
 * row-major element order (the layout rule, see buffer.c), unsupported
 * dtypes, read-only receive buffers -> NcclInvalid; an object with no
 * protocol -> TypeError.  Returns 0, or -1 with an exception set and nothing
 * to release. */
int n4p_buffer_resolve(PyObject *mod, PyObject *obj, const char *name, int flags,
                       n4p_buffer *out);
void n4p_buffer_release(n4p_buffer *b);

/* None -> 0, int, __cuda_stream__() (version 0), .handle, .cuda_stream,
 * .ptr; anything else -> TypeError naming the accepted kinds. */
int n4p_stream_resolve(PyObject *mod, PyObject *obj, void **out);
int n4p_init_buffers(PyObject *mod, n4p_state *st);
PyObject *n4p_py_resolve_buffer(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);
PyObject *n4p_py_resolve_stream(PyObject *mod, PyObject *arg);

/* Bytes per element of an NCCL data type (1 for an unknown one). */
extern const size_t n4p_dtype_sizes[ncclNumTypes];
static inline size_t
n4p_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < ncclNumTypes ? n4p_dtype_sizes[dtype] : 1;
}

/* ------------------------------------------------------------------ groups */

/* group.c: the group depth of this thread, counted by the group_start /
 * group_end / group_simulate_end wrappers, and the keep list that holds
 * what calls made inside a group hand to the library until the outermost
 * group end (see group.c). */
extern _Thread_local int n4p_group_depth_tls;
extern atomic_int n4p_groups_open;
static inline int
n4p_group_depth(void)
{
    if (atomic_load_explicit(&n4p_groups_open, memory_order_relaxed) == 0)
        return 0; /* no thread has a group open: no thread-local read */
    return n4p_group_depth_tls;
}
/* What a kept object does around the outermost group end: group_ending
 * before the library runs the queue, group_ended after it returned (both
 * optional, with the GIL held). */
typedef struct {
    void (*group_ending)(PyObject *);
    void (*group_ended)(PyObject *);
} n4p_keep_hooks;
/* Move b's exports to the keep list (b is left with nothing to release). */
void n4p_group_keep_buffer(n4p_buffer *b);
/* Keep a new reference to o (hooks may be NULL). */
void n4p_group_keep(PyObject *o, const n4p_keep_hooks *hooks);
extern PyMethodDef n4p_group_methods[];

/* ----------------------------------------------------------------- structs */

int n4p_init_structs(PyObject *mod, n4p_state *st);
/* New owned, initialised struct object of the given kind. */
PyObject *n4p_struct_new(n4p_state *st, int kind);
/* A new struct object of the kind holding a copy of *src (a struct returned
 * by value). */
PyObject *n4p_struct_copy(n4p_state *st, int kind, const void *src);
/* Pointer to the C struct inside an object of that kind, or NULL. */
void *n4p_struct_ptr(n4p_state *st, int kind, PyObject *o);
/* The C struct pointer for an argument: an object of that kind, an int
 * address (0 and None give NULL when allow_null). */
int n4p_arg_struct(n4p_state *st, int kind, PyObject *o, const char *name, int allow_null,
                   void **out);
/* A struct argument that may also be any object with an int .ptr: an object
 * of `kind`, an int address (0, and None when allow_null, give NULL), or such
 * an object; a struct object of another kind, or an object whose _lowpp is
 * one, is a TypeError naming both. */
int n4p_arg_struct_addr(n4p_state *st, int kind, PyObject *o, const char *name, int allow_null,
                        void **out);
PyObject *n4p_struct_layouts(PyObject *mod, PyObject *unused);
/* The struct of `kind` at *p as the loaded library understands it
 * (structs.def, N4P_LAYOUT): copied into tmp (sizeof the struct) with the
 * size and version of the library's layout, *p pointed at tmp; 1 when
 * copied, 0 when handed as it is (no layout applies), -1 with NcclInvalid
 * when an input sets a field the library's layout lacks. */
int n4p_struct_for_library(PyObject *mod, int kind, int input, void **p, void *tmp);
/* Copy what the library wrote into tmp back to the caller's struct orig
 * (its fields, as far as its size reaches; its header stays). */
void n4p_struct_from_library(int kind, const void *tmp, void *orig);

int n4p_init_pointer_box(PyObject *mod, n4p_state *st);
int n4p_init_handles(PyObject *mod, n4p_state *st);
/* A new handle object of the kind holding value. */
PyObject *n4p_handle_new(n4p_state *st, enum n4p_handle_kind kind, void *value);
/* A new handle object for a creating function: its slot (n4p_handle_slot) is
 * a cell that outlives the object if the library may still write it ... */
PyObject *n4p_handle_new_out(n4p_state *st, enum n4p_handle_kind kind);
/* ... which the creating function tells once the call returned r: a
 * non-blocking call in progress, or any call inside a group. */
void n4p_handle_called(PyObject *h, ncclResult_t r);
/* The slot of a handle object (any kind): the out-parameter for the library. */
void **n4p_handle_slot(PyObject *o);
/* Whether o is a handle object (Comm or Window, subclasses included). */
int n4p_is_handle(PyObject *o);
/* 1: o is a handle object of `kind`; 0: no handle object; -1: the other
 * kind (TypeError naming both, `name` the parameter). */
int n4p_handle_check(PyObject *o, enum n4p_handle_kind kind, const char *name);
/* The new reference a creating function returns for the handle object h;
 * inside a group it is also kept until the group ends (the library fills
 * the slot then). */
PyObject *n4p_handle_result(PyObject *h);

/* A creating function records the communicator h (a new handle object) is
 * made on. */
void n4p_handle_set_owner(PyObject *h, void *comm);
/* NcclInvalid (-1) when win is a Window object registered on another
 * communicator than comm; 0 for an int, a Window of comm, or one of unknown
 * origin.  name: the argument's name. */
int n4p_window_check_owner(PyObject *mod, PyObject *win, void *comm, const char *name);
/* The kind of a handle object (subclasses included), or -1 for anything else. */
int n4p_handle_kind_of(n4p_state *st, PyObject *o);
int n4p_init_communicator(PyObject *mod, n4p_state *st);
/* gpu_runtime.c: GpuRuntimeError and the gpu_runtime_* functions */
int n4p_init_gpu_runtime(PyObject *mod, n4p_state *st);

/* ---------------------------------------------------------------- wrappers */

#include "gen/api_wrappers.h"

/* A str from a library's C string (UTF-8, undecodable bytes replaced; NULL
 * gives ''). */
PyObject *n4p_str_result(const char *s);

#endif /* NCCL4PY_BINDINGS_H */
