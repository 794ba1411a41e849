/*
 * module.c - the nccl._nccl extension module: state, init, method tables.
 *
 * Importing the module loads no library; the first wrapper call does
 * (see loader.c).
 */
#include "bindings.h"
#include "ndarray_fast.h"
#include "trace.h"

/* _register(name, obj): the Python objects C needs from modules that import
 * nccl._nccl themselves (so module init cannot import them), registered by
 * those modules once, when they are imported.  Unknown names are refused. */
static const struct {
    const char *name;
    size_t offset;
} registrable[] = {
    {"coll_config_materialize", offsetof(n4p_state, coll_config_materialize)},
    {"ndarray_check", offsetof(n4p_state, ndarray_check)},
};

static PyObject *
n4p_register(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_register(name, obj, /): name is a str");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof registrable / sizeof registrable[0]; i++)
        if (strcmp(name, registrable[i].name) == 0) {
            n4p_state *st = n4p_get_state(mod);
            PyObject **slot = (PyObject **)(void *)((char *)st + registrable[i].offset);
            n4p_lock(&st->registered_mu); /* readers take it: n4p_registered */
            PyObject *old = *slot;
            *slot = Py_NewRef(args[1]);
            n4p_unlock(&st->registered_mu);
            Py_XDECREF(old);
            Py_RETURN_NONE;
        }
    PyErr_Format(PyExc_ValueError, "_register: no slot named %R", args[0]);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"_register", (PyCFunction)(void (*)(void))n4p_register, METH_FASTCALL,
     "_register(name, obj, /)\n--\n\n"
     "Register obj as what C calls for name (nccl.core.coll_config registers its "
     "materializer of config=, nccl._ndarray_check its check of numpy.ndarray, at import). "
     "Internal."},
    {"check_status", (PyCFunction)n4p_check_status, METH_O,
     "check_status(status, /)\n--\n\n"
     "Raise NCCLError unless status (an ncclResult_t value) is Success or InProgress.\n\n"
     "Returns None; the error's message is the library's text for the status."},
    {"get_library_path", (PyCFunction)n4p_get_library_path, METH_NOARGS,
     "get_library_path()\n--\n\n"
     "The path of the loaded NCCL/RCCL library, as the dynamic loader resolved it.\n\n"
     "Loads the library on first use; NotSupportedError lists every candidate tried when none "
     "loads."},
    {"library_family", (PyCFunction)n4p_library_family, METH_NOARGS,
     "library_family()\n--\n\n"
     "The family of the loaded library: 'nccl', 'rccl' or 'host' (the bundled host backend).\n\n"
     "Loads the library on first use; NotSupportedError when none loads."},
    {"_loader_report", (PyCFunction)n4p_loader_report, METH_NOARGS,
     "_loader_report()\n--\n\n"
     "Load the library if possible and describe what was tried: {'decision', 'attempts', "
     "'path', 'error', 'missing', 'family'}; never raises for a missing library."},
    {"_api_table", (PyCFunction)n4p_api_table_list, METH_NOARGS,
     "_api_table()\n--\n\n"
     "[(symbol, alternatives, python name, first version, resolved)] for every entry of the "
     "API table; resolved is None before the library is loaded."},
    {"_struct_layouts", (PyCFunction)n4p_struct_layouts, METH_NOARGS,
     "_struct_layouts()\n--\n\n{struct name: (sizeof, [(field, offset, type code)])}"},
    {"_dtype_table", (PyCFunction)n4p_dtype_table, METH_NOARGS,
     "_dtype_table()\n--\n\n"
     "(((nccl name, size, array name, nccl-tests name), ...) by value, the value arrays of "
     "bool travel as): the data types' table the C code reads."},
    {"_slot_stats", (PyCFunction)n4p_slot_stats, METH_NOARGS,
     "_slot_stats()\n--\n\n"
     "(slots whose address was handed out and whose owner is alive, slots kept for the rest "
     "of the process because the library may still write them): src/slot.c."},
    {"resolve_buffer", (PyCFunction)(void (*)(void))n4p_py_resolve_buffer,
     METH_FASTCALL | METH_KEYWORDS,
     "resolve_buffer(obj, name='buffer', writable=False, keep=False, general=False)\n--\n\n"
     "(ptr, count, nccl dtype, DLPack device type, device id, readonly) of a buffer argument "
     "obj; name is the argument's name in error messages, writable says that the library "
     "writes into it.\n"
     "With keep=True inside a group, obj and its export stay alive until the outermost "
     "group end (for a call queued on the returned address).\n\n"
     "Raises NcclInvalid for memory the library cannot take (a layout that is not row-major, "
     "an unsupported dtype, read-only memory with writable=True), TypeError for an object "
     "with no buffer protocol.  general=True: never the numpy.ndarray fast path (tests "
     "compare the two)."},
    {"_ndarray_register", (PyCFunction)(void (*)(void))n4p_py_ndarray_register, METH_FASTCALL,
     "_ndarray_register(type, samples, /)\n--\n\n"
     "Check the numpy.ndarray layout on the sample arrays (a list) against the buffer "
     "protocol and turn the fast path on when they agree; returns whether it is on "
     "(nccl._ndarray_check calls it)."},
    {"_ndarray_fast_info", (PyCFunction)n4p_py_ndarray_fast_info, METH_NOARGS,
     "_ndarray_fast_info()\n--\n\n"
     "{'on', 'tried', 'off' (why not on), 'dtypes' (NumPy type number -> NCCL dtype)} of "
     "the numpy.ndarray fast path."},
    {"_trace_dump_all", (PyCFunction)n4p_trace_dump_all, METH_O,
     "_trace_dump_all(reason) -> n: write every traced communicator's flight record into "
     "NCCL4PY_TRACE_DIR."},
    {"resolve_stream", (PyCFunction)n4p_py_resolve_stream, METH_O,
     "resolve_stream(obj, /)\n--\n\n"
     "The stream handle (int) of a stream argument: None gives 0; an int, an object with "
     "__cuda_stream__, .handle, .cuda_stream or .ptr.\n\n"
     "Raises TypeError naming the accepted kinds for anything else."},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *mod)
{
    n4p_state *st = n4p_get_state(mod);
    if (n4p_init_errors(mod, st) < 0 || n4p_init_structs(mod, st) < 0 ||
        n4p_init_pointer_box(mod, st) < 0 || n4p_init_handles(mod, st) < 0 || n4p_init_buffers(mod, st) < 0 ||
        n4p_init_communicator(mod, st) < 0 || n4p_init_gpu_runtime(mod, st) < 0)
        return -1;
    if (PyModule_AddFunctions(mod, n4p_api_methods) < 0 ||
        PyModule_AddFunctions(mod, n4p_group_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(mod, "API_COUNT", N4P_API_COUNT) < 0 ||
        PyModule_AddIntConstant(mod, "ABI_VERSION", NCCL4PY_ABI_VERSION_CODE) < 0)
        return -1;
    return n4p_init_ndarray(mod, st); /* last: Python code that uses this module */
}

static int
module_traverse(PyObject *mod, visitproc visit, void *arg)
{
    n4p_state *st = n4p_get_state(mod);
    Py_VISIT(st->nccl_error);
    Py_VISIT(st->timeout_error);
    Py_VISIT(st->function_not_found);
    Py_VISIT(st->not_supported);
    Py_VISIT(st->nccl_invalid);
    Py_VISIT(st->comm_base_type);
    Py_VISIT(st->buffer_kinds);
    Py_VISIT(st->last_buffer_type);
    Py_VISIT(st->last_buffer_kind);
    Py_VISIT(st->torch_is_neg);
    Py_VISIT(st->torch_is_conj);
    Py_VISIT(st->torch_requires_grad);
    Py_VISIT(st->ndarray.type);
    Py_VISIT(st->stream_kinds);
    for (int k = 0; k < N4P_S_COUNT; k++)
        Py_VISIT(st->struct_types[k]);
    Py_VISIT(st->pointer_box_type);
    for (int k = 0; k < N4P_H_COUNT; k++)
        Py_VISIT(st->handle_types[k]);
    Py_VISIT(st->gpu_runtime_error);
    Py_VISIT(st->coll_config_materialize);
    Py_VISIT(st->ndarray_check);
    Py_VISIT(st->dtype_parser);
    return 0;
}

static int
module_clear(PyObject *mod)
{
    n4p_state *st = n4p_get_state(mod);
    Py_CLEAR(st->nccl_error);
    Py_CLEAR(st->timeout_error);
    Py_CLEAR(st->function_not_found);
    Py_CLEAR(st->not_supported);
    Py_CLEAR(st->nccl_invalid);
    Py_CLEAR(st->comm_base_type);
    Py_CLEAR(st->buffer_kinds);
    Py_CLEAR(st->last_buffer_type);
    Py_CLEAR(st->last_buffer_kind);
    Py_CLEAR(st->torch_is_neg);
    Py_CLEAR(st->torch_is_conj);
    Py_CLEAR(st->torch_requires_grad);
    Py_CLEAR(st->ndarray.type);
    Py_CLEAR(st->stream_kinds);
    Py_CLEAR(st->str_dlpack);
    Py_CLEAR(st->str_dlpack_device);
    Py_CLEAR(st->str_cai);
    Py_CLEAR(st->str_array_interface);
    Py_CLEAR(st->str_cuda_stream);
    Py_CLEAR(st->str_lowpp);
    Py_CLEAR(st->str_config);
    Py_CLEAR(st->str_comm);
    Py_CLEAR(st->dlpack_kwnames);
    Py_CLEAR(st->dlpack_max_version);
    for (int k = 0; k < N4P_S_COUNT; k++)
        Py_CLEAR(st->struct_types[k]);
    Py_CLEAR(st->pointer_box_type);
    for (int k = 0; k < N4P_H_COUNT; k++)
        Py_CLEAR(st->handle_types[k]);
    Py_CLEAR(st->gpu_runtime_error);
    Py_CLEAR(st->coll_config_materialize);
    Py_CLEAR(st->ndarray_check);
    Py_CLEAR(st->dtype_parser);
    return 0;
}

static void
module_free(void *mod)
{
    module_clear((PyObject *)mod);
}

/*
 * Interpreters.  All Python state is in the module state (one per module
 * object) and the types are heap types; what is process-wide is C data (the
 * loaded libraries, see lazylib.h).  Subinterpreters that share the main GIL
 * are supported (tests/test_module_state.py).  A per-interpreter GIL is not:
 * callbacks that reach Python from a library thread or a consumer use the
 * PyGILState API, which knows only the main interpreter (the host backend's
 * interrupt check in loader.c, which in a subinterpreter therefore sees the
 * main interpreter's signals only; the deleters of gpu_runtime.c's DLPack
 * capsules), and the per-thread group keep list (group.c) is shared by the
 * interpreters a thread runs.  So importing the module in an interpreter
 * with its own GIL is refused with ImportError.
 *
 * The GIL.  The module does not rely on it: on a free-threaded build
 * (3.13t and later) its C code runs in several threads at once, and every
 * piece of shared mutable state is protected without it (ftcompat.h; the
 * list is in docs/architecture.md, "Threads"): the per-type caches of
 * buffer.c and stream.c hand out strong references (no one-entry cache
 * there), the ndarray fast path publishes its tables with release order
 * under a mutex, a slot moves to its cell under slot.c's mutex, destroy()
 * takes the communicator's owner word, the registered objects are read
 * under a mutex, the trace settings load once under one; what was already
 * a lock or an atomic (the lazy libraries, the watchdog's registry and
 * ring, the owner word, the group counters) or per-thread (group depth and
 * keep list, the current trace entry) stays.  So Py_MOD_GIL_NOT_USED:
 * importing the module leaves the GIL off (tests/test_free_threading.py).
 */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "nccl._nccl",
    .m_doc = "C core of nccl4py: loader and low-level bindings of NCCL/RCCL.",
    .m_size = sizeof(n4p_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__nccl(void)
{
    return PyModuleDef_Init(&module_def);
}
