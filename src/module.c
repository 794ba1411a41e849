/*
 * module.c - the nccl._nccl extension module: state, init, method tables.
 *
 * Importing the module loads no library; the first wrapper call does
 * (see loader.c).
 */
#include "bindings.h"
#include "trace.h"

static PyMethodDef module_methods[] = {
    {"check_status", (PyCFunction)n4p_check_status, METH_O,
     "check_status(status)\n--\n\nRaise NCCLError unless status is Success or InProgress."},
    {"get_library_path", (PyCFunction)n4p_get_library_path, METH_NOARGS,
     "get_library_path()\n--\n\nPath of the loaded NCCL/RCCL library (loads it if needed)."},
    {"library_family", (PyCFunction)n4p_library_family, METH_NOARGS,
     "library_family()\n--\n\n'nccl', 'rccl' or 'host': the family of the loaded library."},
    {"_loader_report", (PyCFunction)n4p_loader_report, METH_NOARGS,
     "Load the library if possible and describe what was tried; never raises for a missing "
     "library."},
    {"_api_table", (PyCFunction)n4p_api_table_list, METH_NOARGS,
     "[(symbol, alternatives, python name, first version, resolved)] for every table entry."},
    {"_struct_layouts", (PyCFunction)n4p_struct_layouts, METH_NOARGS,
     "{struct name: (sizeof, [(field, offset, type code)])}"},
    {"resolve_buffer", (PyCFunction)(void (*)(void))n4p_py_resolve_buffer,
     METH_FASTCALL | METH_KEYWORDS,
     "resolve_buffer(obj, name='buffer', writable=False, keep=False)\n--\n\n"
     "(ptr, count, nccl dtype, DLPack device type, device id, readonly) of a buffer argument.\n"
     "With keep=True inside a group, obj and its export stay alive until the outermost "
     "group end (for a call queued on the returned address)."},
    {"_trace_dump_all", (PyCFunction)n4p_trace_dump_all, METH_O,
     "_trace_dump_all(reason) -> n: write every traced communicator's flight record into "
     "NCCL4PY_TRACE_DIR."},
    {"resolve_stream", (PyCFunction)n4p_py_resolve_stream, METH_O,
     "resolve_stream(obj)\n--\n\nThe stream handle (int) of a stream argument."},
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
    if (PyModule_AddFunctions(mod, n4p_generated_methods) < 0 ||
        PyModule_AddFunctions(mod, n4p_wrapper_methods) < 0 ||
        PyModule_AddFunctions(mod, n4p_group_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(mod, "API_COUNT", N4P_API_COUNT) < 0 ||
        PyModule_AddIntConstant(mod, "ABI_VERSION", NCCL4PY_ABI_VERSION_CODE) < 0)
        return -1;
    return 0;
}

static int
module_traverse(PyObject *mod, visitproc visit, void *arg)
{
    n4p_state *st = n4p_get_state(mod);
    Py_VISIT(st->nccl_error);
    Py_VISIT(st->function_not_found);
    Py_VISIT(st->not_supported);
    Py_VISIT(st->nccl_invalid);
    Py_VISIT(st->comm_base_type);
    Py_VISIT(st->buffer_kinds);
    Py_VISIT(st->last_buffer_type);
    Py_VISIT(st->last_buffer_kind);
    Py_VISIT(st->stream_kinds);
    for (int k = 0; k < N4P_S_COUNT; k++)
        Py_VISIT(st->struct_types[k]);
    Py_VISIT(st->pointer_box_type);
    for (int k = 0; k < N4P_H_COUNT; k++)
        Py_VISIT(st->handle_types[k]);
    Py_VISIT(st->gpu_runtime_error);
    return 0;
}

static int
module_clear(PyObject *mod)
{
    n4p_state *st = n4p_get_state(mod);
    Py_CLEAR(st->nccl_error);
    Py_CLEAR(st->function_not_found);
    Py_CLEAR(st->not_supported);
    Py_CLEAR(st->nccl_invalid);
    Py_CLEAR(st->comm_base_type);
    Py_CLEAR(st->buffer_kinds);
    Py_CLEAR(st->last_buffer_type);
    Py_CLEAR(st->last_buffer_kind);
    Py_CLEAR(st->stream_kinds);
    Py_CLEAR(st->str_dlpack);
    Py_CLEAR(st->str_dlpack_device);
    Py_CLEAR(st->str_cai);
    Py_CLEAR(st->str_array_interface);
    Py_CLEAR(st->str_cuda_stream);
    Py_CLEAR(st->dlpack_kwnames);
    Py_CLEAR(st->dlpack_max_version);
    for (int k = 0; k < N4P_S_COUNT; k++)
        Py_CLEAR(st->struct_types[k]);
    Py_CLEAR(st->pointer_box_type);
    for (int k = 0; k < N4P_H_COUNT; k++)
        Py_CLEAR(st->handle_types[k]);
    Py_CLEAR(st->gpu_runtime_error);
    return 0;
}

static void
module_free(void *mod)
{
    module_clear((PyObject *)mod);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
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
