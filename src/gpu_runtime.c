/*
 * gpu_runtime.c - a tiny dlopen'd HIP / CUDA runtime layer.
 *
 * It serves the cuda.core shim (nccl._hip_compat.cuda_core_shim) and
 * nccl.core's device/memory helpers, so that nccl4py needs neither
 * cuda.core nor hip-python.  Its table is src/gpu_runtime.def: the runtime
 * functions it binds, and the Python functions defined here.
 *
 *   - The library is a lazy library (lazylib.h), like the NCCL library of
 *     loader.c: opened on first use, once per process.  The candidates and
 *     the platform come from nccl._runtime.candidates().
 *   - The family (HIP or CUDA) decides which symbol names are bound: the
 *     file name says it (libamdhip64* / libcudart*), otherwise the presence
 *     of hipGetDeviceCount does.
 *   - Every runtime call runs with the GIL released.
 *   - A failing status raises GpuRuntimeError (a Nccl4pyError and a
 *     RuntimeError, defined in nccl/_errors.py) carrying the runtime's own
 *     error name and string, and the status as `.status`.
 */
#define _GNU_SOURCE
#include "bindings.h"
#include "dlpack.h"
#include "gpu_runtime.h"
#include "trace.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* The runtime's families: which symbol names are bound. */
enum { RT_HIP = 0, RT_CUDA = 1 };

/* Symbol names per family: the name, a NUL, the fallback (maybe empty), a
 * NUL: the alternatives list of lazylib.h. */
static const char *const rt_names[2][N4P_GPU_COUNT] = {
#define N4P_GPU_HIP_(id, ret, params, hip, cuda, hip_alt, cuda_alt) #hip "\0" hip_alt "\0",
#define N4P_GPU_CUDA_(id, ret, params, hip, cuda, hip_alt, cuda_alt) #cuda "\0" cuda_alt "\0",
    {N4P_GPU_API(N4P_GPU_HIP_)},
    {N4P_GPU_API(N4P_GPU_CUDA_)},
#undef N4P_GPU_HIP_
#undef N4P_GPU_CUDA_
};

static const char *
rt_symbols(int family, int idx)
{
    return rt_names[family][idx];
}

/* The file name says the family (libamdhip64* / libcudart*), otherwise the
 * presence of hipGetDeviceCount does. */
static int
rt_family(void *handle, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strstr(base, "amdhip") != NULL)
        return RT_HIP;
    if (strstr(base, "cudart") != NULL)
        return RT_CUDA;
    return dlsym(handle, "hipGetDeviceCount") != NULL ? RT_HIP : RT_CUDA;
}

static void *rt_fns[N4P_GPU_COUNT];
static n4p_lazylib rt = N4P_LAZYLIB(
    rt_fns, "a GPU runtime library", "nccl._runtime",
    "Install ROCm (libamdhip64.so) or the CUDA runtime (e.g. the nvidia-cuda-runtime wheel), or "
    "set NCCL4PY_GPU_RUNTIME to the library's path.",
    rt_family, rt_symbols, NULL);

static const char *
rt_symbol(int idx)
{
    return n4p_lazylib_symbol(&rt, idx);
}

/* The function pointer of entry idx (loads the runtime), or NULL with
 * GpuRuntimeError set. */
static void *
rt_fn(PyObject *mod, int idx)
{
    n4p_state *st = n4p_get_state(mod);
    if (n4p_lazylib_load(&rt, st->gpu_runtime_error) < 0)
        return NULL;
    void *p = rt_fns[idx];
    if (p == NULL)
        n4p_lazylib_raise_missing(&rt, st->gpu_runtime_error, idx, "the GPU runtime ");
    return p;
}

/* For the watchdog (trace.h): with mod (the GIL held) load the runtime if
 * needed, without (any thread) only look; NULL when absent, no exception. */
void *
n4p_gpu_fn_quiet(PyObject *mod, int idx)
{
    if (!n4p_lazylib_ready(&rt)) {
        if (mod == NULL || n4p_lazylib_load(&rt, n4p_get_state(mod)->gpu_runtime_error) < 0) {
            if (mod != NULL)
                PyErr_Clear();
            return NULL;
        }
    }
    return rt_fns[idx];
}

#define RT_FN(mod, id, var)                                                  \
    n4p_gpu_##id##_fn var = (n4p_gpu_##id##_fn)rt_fn((mod), N4P_GPU_##id);   \
    if (var == NULL)                                                         \
        return NULL

/* Raise GpuRuntimeError for a failing status of entry idx; returns NULL. */
static PyObject *
rt_raise(PyObject *mod, int idx, int status)
{
    n4p_state *st = n4p_get_state(mod);
    n4p_gpu_GET_ERROR_NAME_fn name_fn = (n4p_gpu_GET_ERROR_NAME_fn)rt_fns[N4P_GPU_GET_ERROR_NAME];
    n4p_gpu_GET_ERROR_STRING_fn str_fn =
        (n4p_gpu_GET_ERROR_STRING_fn)rt_fns[N4P_GPU_GET_ERROR_STRING];
    const char *name = NULL, *text = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (name_fn != NULL)
        name = name_fn(status);
    if (str_fn != NULL)
        text = str_fn(status);
    Py_END_ALLOW_THREADS
    PyObject *msg = PyUnicode_FromFormat("%s failed: %s (%d): %s", rt_symbol(idx),
                                         name ? name : "error", status,
                                         text ? text : "unknown error");
    if (msg == NULL)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(st->gpu_runtime_error, msg);
    Py_DECREF(msg);
    if (exc == NULL)
        return NULL;
    PyObject *code = PyLong_FromLong(status);
    PyObject *fname = PyUnicode_FromString(rt_symbol(idx));
    if (code == NULL || fname == NULL || PyObject_SetAttrString(exc, "status", code) < 0 ||
        PyObject_SetAttrString(exc, "function", fname) < 0) {
        Py_XDECREF(code);
        Py_XDECREF(fname);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    Py_DECREF(fname);
    PyErr_SetObject(st->gpu_runtime_error, exc);
    Py_DECREF(exc);
    return NULL;
}

#define CHECK(mod, id, status)                      \
    do {                                            \
        if ((status) != N4P_GPU_SUCCESS)            \
            return rt_raise((mod), N4P_GPU_##id, (status)); \
    } while (0)

/* Call entry id (loading the runtime; NULL returned when it lacks the
 * function) with the GIL released: result = fn args. */
#define RT_RUN(mod, id, result, args)           \
    do {                                        \
        RT_FN(mod, id, fn_);                    \
        Py_BEGIN_ALLOW_THREADS                  \
        (result) = fn_ args;                    \
        Py_END_ALLOW_THREADS                    \
    } while (0)

/* The same for a status, raising GpuRuntimeError when it is a failure. */
#define RT_CALL(mod, id, args)                  \
    do {                                        \
        int status_;                            \
        RT_RUN(mod, id, status_, args);         \
        CHECK(mod, id, status_);                \
    } while (0)

/* ------------------------------------------------------- argument helpers */

static int
nargs_exact(const char *fname, Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi)
{
    if (nargs < lo || nargs > hi) {
        if (lo == hi)
            PyErr_Format(PyExc_TypeError, "%s() takes %zd argument%s (%zd given)", fname, lo,
                         lo == 1 ? "" : "s", nargs);
        else
            PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd arguments (%zd given)", fname,
                         lo, hi, nargs);
        return -1;
    }
    return 0;
}

/* A stream argument: None -> 0, an int, or any stream object nccl accepts. */
static int
arg_stream(PyObject *mod, PyObject *o, void **out)
{
    return n4p_stream_resolve(mod, o, out);
}

static PyObject *
ptr_obj(void *p)
{
    return PyLong_FromVoidPtr(p);
}

/* ------------------------------------------------------------ the methods */

#define FASTCALL_ARGS PyObject *mod, PyObject *const *args, Py_ssize_t nargs

static PyObject *
rt_device_count(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    int count = 0, status;
    RT_RUN(mod, GET_DEVICE_COUNT, status, (&count));
    if (status == N4P_GPU_ERROR_NO_DEVICE)
        return PyLong_FromLong(0); /* "no device" is an answer, not a failure */
    CHECK(mod, GET_DEVICE_COUNT, status);
    return PyLong_FromLong(count);
}

static PyObject *
rt_get_device(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    int dev = 0;
    RT_CALL(mod, GET_DEVICE, (&dev));
    return PyLong_FromLong(dev);
}

static PyObject *
rt_set_device(PyObject *mod, PyObject *arg)
{
    int dev;
    if (n4p_arg_int(arg, "device", &dev) < 0)
        return NULL;
    RT_CALL(mod, SET_DEVICE, (dev));
    Py_RETURN_NONE;
}

static PyObject *
rt_device_name(PyObject *mod, PyObject *arg)
{
    int dev;
    if (n4p_arg_int(arg, "device", &dev) < 0)
        return NULL;
    RT_FN(mod, GET_DEVICE_PROPERTIES, fn);
    char *prop = PyMem_Calloc(1, N4P_GPU_PROP_BYTES);
    if (prop == NULL)
        return PyErr_NoMemory();
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = fn(prop, dev);
    Py_END_ALLOW_THREADS
    if (status != N4P_GPU_SUCCESS) {
        PyMem_Free(prop);
        return rt_raise(mod, N4P_GPU_GET_DEVICE_PROPERTIES, status);
    }
    PyObject *r = PyUnicode_DecodeUTF8(prop, (Py_ssize_t)strnlen(prop, 256), "replace");
    PyMem_Free(prop);
    return r;
}

static PyObject *
rt_pci_bus_id(PyObject *mod, PyObject *arg)
{
    int dev;
    if (n4p_arg_int(arg, "device", &dev) < 0)
        return NULL;
    char buf[64] = "";
    RT_CALL(mod, DEVICE_GET_PCI_BUS_ID, (buf, (int)sizeof buf - 1, dev));
    return PyUnicode_FromStringAndSize(buf, (Py_ssize_t)strnlen(buf, sizeof buf));
}

static PyObject *
rt_device_synchronize(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    RT_CALL(mod, DEVICE_SYNCHRONIZE, ());
    Py_RETURN_NONE;
}

static PyObject *
rt_runtime_version(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    int v = 0;
    RT_CALL(mod, RUNTIME_GET_VERSION, (&v));
    return PyLong_FromLong(v);
}

static PyObject *
rt_stream_create(FASTCALL_ARGS)
{
    unsigned int flags = N4P_GPU_STREAM_NON_BLOCKING;
    if (nargs_exact("gpu_runtime_stream_create", nargs, 0, 1) < 0 ||
        (nargs == 1 && n4p_arg_uint(args[0], "flags", &flags) < 0))
        return NULL;
    void *s = NULL;
    RT_CALL(mod, STREAM_CREATE_WITH_FLAGS, (&s, flags));
    return ptr_obj(s);
}

/* Methods taking one handle: destroy/synchronize a stream or an event, free. */
#define ONE_HANDLE(pyname, id, argname, resolver)                   \
    static PyObject *pyname(PyObject *mod, PyObject *arg)           \
    {                                                               \
        void *h;                                                    \
        if (resolver < 0)                                           \
            return NULL;                                            \
        RT_CALL(mod, id, (h));                                      \
        Py_RETURN_NONE;                                             \
    }

ONE_HANDLE(rt_stream_destroy, STREAM_DESTROY, "stream", arg_stream(mod, arg, &h))
ONE_HANDLE(rt_stream_synchronize, STREAM_SYNCHRONIZE, "stream", arg_stream(mod, arg, &h))
ONE_HANDLE(rt_event_destroy, EVENT_DESTROY, "event", n4p_arg_ptr(arg, "event", &h))
ONE_HANDLE(rt_event_synchronize, EVENT_SYNCHRONIZE, "event", n4p_arg_ptr(arg, "event", &h))
ONE_HANDLE(rt_free, FREE, "ptr", n4p_arg_ptr(arg, "ptr", &h))
ONE_HANDLE(rt_free_host, FREE_HOST, "ptr", n4p_arg_ptr(arg, "ptr", &h))

static PyObject *
rt_stream_query(PyObject *mod, PyObject *arg)
{
    void *s;
    if (arg_stream(mod, arg, &s) < 0)
        return NULL;
    int status;
    RT_RUN(mod, STREAM_QUERY, status, (s));
    if (status == N4P_GPU_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    CHECK(mod, STREAM_QUERY, status);
    Py_RETURN_TRUE;
}

static PyObject *
rt_event_create(FASTCALL_ARGS)
{
    unsigned int flags = 0;
    if (nargs_exact("gpu_runtime_event_create", nargs, 0, 1) < 0 ||
        (nargs == 1 && n4p_arg_uint(args[0], "flags", &flags) < 0))
        return NULL;
    void *e = NULL;
    RT_CALL(mod, EVENT_CREATE_WITH_FLAGS, (&e, flags));
    return ptr_obj(e);
}

static PyObject *
rt_event_record(FASTCALL_ARGS)
{
    void *e, *s = NULL;
    if (nargs_exact("gpu_runtime_event_record", nargs, 1, 2) < 0 ||
        n4p_arg_ptr(args[0], "event", &e) < 0 ||
        (nargs == 2 && arg_stream(mod, args[1], &s) < 0))
        return NULL;
    RT_CALL(mod, EVENT_RECORD, (e, s));
    Py_RETURN_NONE;
}

static PyObject *
rt_event_elapsed(FASTCALL_ARGS)
{
    void *a, *b;
    if (nargs_exact("gpu_runtime_event_elapsed", nargs, 2, 2) < 0 ||
        n4p_arg_ptr(args[0], "start", &a) < 0 || n4p_arg_ptr(args[1], "stop", &b) < 0)
        return NULL;
    float ms = 0.0f;
    RT_CALL(mod, EVENT_ELAPSED_TIME, (&ms, a, b));
    return PyFloat_FromDouble((double)ms);
}

static PyObject *
rt_malloc(PyObject *mod, PyObject *arg)
{
    size_t size;
    if (n4p_arg_size(arg, "size", &size) < 0)
        return NULL;
    void *p = NULL;
    RT_CALL(mod, MALLOC, (&p, size));
    return ptr_obj(p);
}

static PyObject *
rt_malloc_host(FASTCALL_ARGS)
{
    size_t size;
    unsigned int flags = N4P_GPU_HOST_ALLOC_PORTABLE;
    if (nargs_exact("gpu_runtime_malloc_host", nargs, 1, 2) < 0 ||
        n4p_arg_size(args[0], "size", &size) < 0 ||
        (nargs == 2 && n4p_arg_uint(args[1], "flags", &flags) < 0))
        return NULL;
    void *p = NULL;
    RT_CALL(mod, HOST_ALLOC, (&p, size, flags));
    return ptr_obj(p);
}

/* memcpy(dst, src, size[, stream]): the async variant when a stream is given
 * (None included); the runtime infers the direction (MemcpyDefault). */
static PyObject *
rt_memcpy_impl(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, int async)
{
    void *dst, *src, *s = NULL;
    size_t size;
    const char *fname = async ? "gpu_runtime_memcpy_async" : "gpu_runtime_memcpy";
    if (nargs_exact(fname, nargs, 3 + async, 3 + async) < 0 ||
        n4p_arg_ptr(args[0], "dst", &dst) < 0 || n4p_arg_ptr(args[1], "src", &src) < 0 ||
        n4p_arg_size(args[2], "size", &size) < 0 ||
        (async && arg_stream(mod, args[3], &s) < 0))
        return NULL;
    if (async)
        RT_CALL(mod, MEMCPY_ASYNC, (dst, src, size, N4P_GPU_MEMCPY_DEFAULT, s));
    else
        RT_CALL(mod, MEMCPY, (dst, src, size, N4P_GPU_MEMCPY_DEFAULT));
    Py_RETURN_NONE;
}

static PyObject *
rt_memcpy(FASTCALL_ARGS)
{
    return rt_memcpy_impl(mod, args, nargs, 0);
}

static PyObject *
rt_memcpy_async(FASTCALL_ARGS)
{
    return rt_memcpy_impl(mod, args, nargs, 1);
}

static PyObject *
rt_memset_impl(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, int async)
{
    void *p, *s = NULL;
    int value;
    size_t size;
    const char *fname = async ? "gpu_runtime_memset_async" : "gpu_runtime_memset";
    if (nargs_exact(fname, nargs, 3 + async, 3 + async) < 0 ||
        n4p_arg_ptr(args[0], "ptr", &p) < 0 || n4p_arg_int(args[1], "value", &value) < 0 ||
        n4p_arg_size(args[2], "size", &size) < 0 ||
        (async && arg_stream(mod, args[3], &s) < 0))
        return NULL;
    if (async)
        RT_CALL(mod, MEMSET_ASYNC, (p, value, size, s));
    else
        RT_CALL(mod, MEMSET, (p, value, size));
    Py_RETURN_NONE;
}

static PyObject *
rt_memset(FASTCALL_ARGS)
{
    return rt_memset_impl(mod, args, nargs, 0);
}

static PyObject *
rt_memset_async(FASTCALL_ARGS)
{
    return rt_memset_impl(mod, args, nargs, 1);
}

/* (memory type, device) of a pointer; types are N4P_GPU_MEM_*. */
static PyObject *
rt_pointer_attributes(PyObject *mod, PyObject *arg)
{
    void *p;
    if (n4p_arg_ptr(arg, "ptr", &p) < 0)
        return NULL;
    /* room for either runtime's struct, which begins with our common fields */
    union {
        n4p_gpu_pointer_attributes common;
        unsigned char room[256];
    } attrs;
    memset(&attrs, 0, sizeof attrs);
    RT_CALL(mod, POINTER_GET_ATTRIBUTES, (&attrs, p));
    return Py_BuildValue("(ii)", attrs.common.type, attrs.common.device);
}

/* The runtime's text for a status: its description or its name (idx). */
static PyObject *
rt_error_text(PyObject *mod, PyObject *arg, int idx)
{
    int code;
    if (n4p_arg_int(arg, "status", &code) < 0)
        return NULL;
    n4p_gpu_GET_ERROR_STRING_fn fn = (n4p_gpu_GET_ERROR_STRING_fn)rt_fn(mod, idx);
    if (fn == NULL)
        return NULL;
    const char *s;
    Py_BEGIN_ALLOW_THREADS
    s = fn(code);
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(s ? s : "unknown error");
}

static PyObject *
rt_error_string(PyObject *mod, PyObject *arg)
{
    return rt_error_text(mod, arg, N4P_GPU_GET_ERROR_STRING);
}

static PyObject *
rt_error_name(PyObject *mod, PyObject *arg)
{
    return rt_error_text(mod, arg, N4P_GPU_GET_ERROR_NAME);
}

/* {"loaded", "platform", "path", "decision", "attempts", "missing", "error"};
 * loads the runtime if possible and never raises for a missing one (the
 * error is under "error"). */
static PyObject *
rt_info(PyObject *mod, PyObject *Py_UNUSED(unused))
{
    PyObject *error = n4p_lazylib_load_error(&rt, n4p_get_state(mod)->gpu_runtime_error, 0);
    if (error == NULL)
        return NULL;
    int loaded = n4p_lazylib_ready(&rt);
    return Py_BuildValue("{s:O,s:s,s:N,s:N,s:N,s:N,s:N}", "loaded", loaded ? Py_True : Py_False,
                         "platform", loaded ? (rt.family == RT_HIP ? "rocm" : "cuda") : NULL,
                         "path", n4p_lazylib_path(&rt), "decision", n4p_lazylib_decision(&rt),
                         "attempts", n4p_lazylib_attempts(&rt), "missing",
                         n4p_lazylib_missing(&rt), "error", error);
}

/* Every table entry: [(HIP symbol, CUDA symbol, HIP fallback, CUDA fallback)]. */
static PyObject *
rt_table(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    PyObject *out = PyList_New(N4P_GPU_COUNT);
    for (int i = 0; out != NULL && i < N4P_GPU_COUNT; i++) {
        const char *h = rt_names[RT_HIP][i], *c = rt_names[RT_CUDA][i];
        PyObject *t = Py_BuildValue("(ssss)", h, c, h + strlen(h) + 1, c + strlen(c) + 1);
        if (t == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* ------------------------------------------------------- DLPack export */

/* A 1-D int8 DLPack tensor of `nbytes` bytes at `ptr` on (device_type,
 * device_id) that keeps `owner` alive until the consumer's deleter runs. */
typedef struct {
    int64_t shape[1];
    PyObject *owner;
} rt_dl_ctx;

static void
rt_dl_release_ctx(void *ctx_)
{
    rt_dl_ctx *ctx = ctx_;
    if (ctx == NULL)
        return;
    PyGILState_STATE g = PyGILState_Ensure(); /* consumers may call without the GIL */
    Py_XDECREF(ctx->owner);
    PyMem_RawFree(ctx);
    PyGILState_Release(g);
}

static void
rt_dl_deleter(n4p_dlmanaged *m)
{
    rt_dl_release_ctx(m->manager_ctx);
    PyMem_RawFree(m);
}

static void
rt_dl_deleter_v(n4p_dlmanaged_v *m)
{
    rt_dl_release_ctx(m->manager_ctx);
    PyMem_RawFree(m);
}

static void
rt_capsule_destructor(PyObject *cap)
{
    /* an unconsumed capsule still owns its tensor */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        n4p_dlmanaged *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        n4p_dlmanaged_v *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter)
            m->deleter(m);
    }
}

static PyObject *
rt_dlpack_capsule(FASTCALL_ARGS)
{
    void *ptr;
    size_t nbytes;
    int devtype, devid, versioned, readonly = 0;
    (void)mod;
    if (nargs_exact("gpu_runtime_dlpack_capsule", nargs, 6, 7) < 0 ||
        n4p_arg_ptr(args[0], "ptr", &ptr) < 0 || n4p_arg_size(args[1], "nbytes", &nbytes) < 0 ||
        n4p_arg_int(args[2], "device_type", &devtype) < 0 ||
        n4p_arg_int(args[3], "device_id", &devid) < 0)
        return NULL;
    versioned = PyObject_IsTrue(args[5]);
    if (versioned < 0 || (nargs == 7 && (readonly = PyObject_IsTrue(args[6])) < 0))
        return NULL;
    if (nbytes > (size_t)INT64_MAX) {
        PyErr_SetString(PyExc_OverflowError, "nbytes is too large");
        return NULL;
    }
    rt_dl_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (ctx == NULL)
        return PyErr_NoMemory();
    ctx->shape[0] = (int64_t)nbytes;
    ctx->owner = Py_NewRef(args[4]);
    n4p_dltensor t = {
        .data = ptr,
        .device = {devtype, devid},
        .ndim = 1,
        .dtype = {0 /* kDLInt */, 8, 1},
        .shape = ctx->shape,
        .strides = NULL,
        .byte_offset = 0,
    };
    PyObject *cap;
    if (versioned) {
        n4p_dlmanaged_v *m = PyMem_RawCalloc(1, sizeof *m);
        if (m == NULL) {
            rt_dl_release_ctx(ctx);
            return PyErr_NoMemory();
        }
        m->version.major = 1;
        m->version.minor = 1;
        m->manager_ctx = ctx;
        m->deleter = rt_dl_deleter_v;
        m->flags = readonly ? 1u /* DLPACK_FLAG_BITMASK_READ_ONLY */ : 0u;
        m->dl_tensor = t;
        cap = PyCapsule_New(m, "dltensor_versioned", rt_capsule_destructor);
        if (cap == NULL)
            rt_dl_deleter_v(m);
    } else {
        n4p_dlmanaged *m = PyMem_RawCalloc(1, sizeof *m);
        if (m == NULL) {
            rt_dl_release_ctx(ctx);
            return PyErr_NoMemory();
        }
        m->manager_ctx = ctx;
        m->deleter = rt_dl_deleter;
        m->dl_tensor = t;
        cap = PyCapsule_New(m, "dltensor", rt_capsule_destructor);
        if (cap == NULL)
            rt_dl_deleter(m);
    }
    return cap;
}

/* ------------------------------------------------------------ registration */

/* The method table n4p_gpu_methods, generated from src/gpu_runtime.def. */
#include "gen/gpu_methods.h"

int
n4p_init_gpu_runtime(PyObject *mod, n4p_state *st)
{
    /* The class lives in nccl/_errors.py with the rest of the family (a
     * Nccl4pyError and a RuntimeError); n4p_init_errors fetched it. */
    if (PyModule_AddObjectRef(mod, "GpuRuntimeError", st->gpu_runtime_error) < 0)
        return -1;
    return PyModule_AddFunctions(mod, n4p_gpu_methods);
}
