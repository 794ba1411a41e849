/*
 * errors.c - turning library status codes into Python exceptions.
 *
 * The exception classes live in nccl/_errors.py (plain Python, so that they
 * pickle by reference and need no library to be re-created); this file only
 * fetches them at module init and raises them.
 */
#include "bindings.h"

int
n4p_init_errors(PyObject *Py_UNUSED(mod), n4p_state *st)
{
    struct {
        PyObject **slot;
        const char *name;
    } classes[] = {
        {&st->nccl_error, "NCCLError"},
        {&st->timeout_error, "NcclTimeoutError"},
        {&st->function_not_found, "FunctionNotFoundError"},
        {&st->not_supported, "NotSupportedError"},
        {&st->nccl_invalid, "NcclInvalid"},
        {&st->gpu_runtime_error, "GpuRuntimeError"},
    };
    PyObject *m = PyImport_ImportModule("nccl._errors");
    if (m == NULL)
        return -1;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        /* stop at the first failure: no call with its exception pending */
        if ((*classes[i].slot = PyObject_GetAttrString(m, classes[i].name)) == NULL) {
            Py_DECREF(m);
            return -1;
        }
    }
    Py_DECREF(m);
    return 0;
}

PyObject *
n4p_raise_status(PyObject *mod, ncclResult_t status)
{
    if (PyErr_Occurred()) /* a signal handler raised while the call waited */
        return NULL;
    n4p_state *st = n4p_get_state(mod);
    PyObject *exc = PyObject_CallFunction(st->nccl_error, "i", (int)status);
    if (exc != NULL) {
        PyErr_SetObject(st->nccl_error, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *
n4p_check_status(PyObject *mod, PyObject *arg)
{
    int status;
    if (n4p_arg_int(arg, "status", &status) < 0)
        return NULL;
    return n4p_status_none(mod, (ncclResult_t)status);
}
