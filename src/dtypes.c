/*
 * dtypes.c - the data types' table (gen/dtype_table.h, from dtypes.def) as
 * Python reads it: _nccl._dtype_table(), which the tests compare with the
 * table and with nccl._dtypes.  The C code reads the table through
 * n4p_dtype_size and n4p_dtype_name (bindings.h).
 */
#include "bindings.h"

/* ((nccl name, size, array name, nccl-tests name), ...) by value, and the
 * value arrays of bool travel as. */
PyObject *
n4p_dtype_table(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    PyObject *rows = PyTuple_New(ncclNumTypes);
    if (rows == NULL)
        return NULL;
    for (int v = 0; v < ncclNumTypes; v++) {
        const n4p_dtype_row *r = n4p_dtype_row_of(v);
        PyObject *t = Py_BuildValue("(snss)", r->nccl_name, (Py_ssize_t)r->size, r->array_name,
                                    r->tests_name);
        if (t == NULL) {
            Py_DECREF(rows);
            return NULL;
        }
        PyTuple_SET_ITEM(rows, v, t);
    }
    return Py_BuildValue("(Ni)", rows, N4P_DTYPE_BOOL_AS);
}
