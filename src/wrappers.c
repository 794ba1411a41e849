/*
 * wrappers.c - the hand-written wrappers of the API table (flag "hand"):
 * the ones whose logic is no pattern of tools/gen.  Their names,
 * docstrings and method-table entries are generated like the others'.
 *
 *   comm_init_all   returns a list of ndev new Comm objects (ndev 0: []
 *                   without a call)
 *   all_to_all_v    four arrays of one entry per rank: their lengths must
 *                   agree with each other and with the communicator's size
 *   param_get, param_get_parameter, param_get_all_keys
 *                   values and names the library returns with their lengths
 *                   (bytes, str with KeyError for an unknown key, list[str])
 *
 * (group_start, group_end and group_simulate_end are in group.c.)
 */
#include "bindings.h"

#include <string.h>

#define PARSE(fname, kwlist, minn, maxn, arr)                                                  \
    do {                                                                                       \
        if (n4p_parse_args(args, nargs, kwnames, fname, kwlist, minn, maxn, arr) < 0)          \
            return NULL;                                                                       \
    } while (0)

#define GETFN(sym)                                                                             \
    sym##_fn fn = (sym##_fn)n4p_fn(mod, N4P_IDX_##sym);                                        \
    if (fn == NULL)                                                                            \
        return NULL

#define FASTCALL_ARGS PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames

PyObject *
n4p_w_comm_init_all(FASTCALL_ARGS)
{
    static const char *const kw[] = {"ndev", "devlist", NULL};
    PyObject *a[2];
    PARSE("comm_init_all", kw, 1, 2, a);
    GETFN(ncclCommInitAll);
    int ndev, *devs, owned;
    Py_ssize_t len;
    if (n4p_arg_int(a[0], "ndev", &ndev) < 0)
        return NULL;
    if (ndev < 0) {
        PyErr_SetString(PyExc_ValueError, "ndev must be >= 0");
        return NULL;
    }
    if (n4p_arg_int_array(a[1] ? a[1] : Py_None, "devlist", &devs, &len, &owned) < 0)
        return NULL;
    if (owned && len != ndev) {
        PyMem_Free(devs);
        PyErr_Format(PyExc_ValueError, "devlist has %zd entries but ndev is %d", len, ndev);
        return NULL;
    }
    if (ndev == 0) {
        if (owned)
            PyMem_Free(devs);
        return PyList_New(0);
    }
    /* an array of ncclComm_t handles (pointers), so sizeof of a pointer is meant */
    ncclComm_t *comms = PyMem_Calloc((size_t)ndev, sizeof *comms); /* NOLINT(bugprone-sizeof-expression) */
    if (comms == NULL) {
        if (owned)
            PyMem_Free(devs);
        return PyErr_NoMemory();
    }
    ncclResult_t r;
    CALL(fn(comms, ndev, devs));
    if (owned)
        PyMem_Free(devs);
    PyObject *res = NULL;
    n4p_state *st = n4p_get_state(mod);
    if (n4p_status_failed(r)) {
        n4p_raise_status(mod, r);
    } else if ((res = PyList_New(ndev)) != NULL) {
        for (int i = 0; i < ndev; i++) {
            PyObject *h = n4p_handle_new(st, N4P_H_COMM, comms[i]);
            if (h == NULL) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, i, h);
        }
    }
    PyMem_Free(comms);
    return res;
}

PyObject *
n4p_w_all_to_all_v(FASTCALL_ARGS)
{
    static const char *const kw[] = {"sendbuff", "sendcounts", "sdispls", "recvbuff",
                                     "recvcounts", "rdispls", "datatype", "comm", "stream", NULL};
    static const char *const arr_names[] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
    PyObject *a[9];
    PARSE("all_to_all_v", kw, 9, 9, a);
    GETFN(ncclAllToAllv);
    void *send, *recv, *comm, *stream;
    int dtype;
    if (n4p_arg_ptr(a[0], "sendbuff", &send) < 0 || n4p_arg_ptr(a[3], "recvbuff", &recv) < 0 ||
        n4p_arg_int(a[6], "datatype", &dtype) < 0 || n4p_arg_comm(a[7], "comm", &comm) < 0 ||
        n4p_arg_ptr(a[8], "stream", &stream) < 0)
        return NULL;
    PyObject *arr_objs[4] = {a[1], a[2], a[4], a[5]};
    size_t *arr[4] = {NULL, NULL, NULL, NULL};
    int owned[4] = {0, 0, 0, 0};
    Py_ssize_t len[4], seqlen = -1;
    PyObject *res = NULL;
    for (int i = 0; i < 4; i++) {
        if (arr_objs[i] == Py_None) {
            PyErr_Format(PyExc_TypeError, "%s must be a sequence or an int address, not None",
                         arr_names[i]);
            goto done;
        }
        if (n4p_arg_size_array(arr_objs[i], arr_names[i], &arr[i], &len[i], &owned[i]) < 0)
            goto done;
        if (owned[i]) {
            if (seqlen >= 0 && len[i] != seqlen) {
                PyErr_SetString(PyExc_ValueError,
                                "sendcounts, sdispls, recvcounts and rdispls must have the same length");
                goto done;
            }
            seqlen = len[i];
        }
    }
    if (seqlen >= 0) {
        /* sequences must have one entry per rank, or the library reads past them */
        ncclCommCount_fn count = (ncclCommCount_fn)n4p_fns[N4P_IDX_ncclCommCount];
        int nranks = -1;
        ncclResult_t rc = ncclSuccess;
        if (count != NULL && comm != NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = count((ncclComm_t)comm, &nranks);
            Py_END_ALLOW_THREADS
        }
        if (n4p_status_failed(rc)) {
            n4p_raise_status(mod, rc);
            goto done;
        }
        if (nranks >= 0 && nranks != seqlen) {
            PyErr_Format(PyExc_ValueError,
                         "counts and displacements need one entry per rank (%d), got %zd", nranks,
                         seqlen);
            goto done;
        }
    }
    ncclResult_t r;
    CALL(fn(send, arr[0], arr[1], recv, arr[2], arr[3], (ncclDataType_t)dtype, (ncclComm_t)comm,
            (cudaStream_t)stream));
    res = n4p_status_none(mod, r);
done:
    for (int i = 0; i < 4; i++)
        if (owned[i])
            PyMem_Free(arr[i]);
    return res;
}

/* ------------------------------------------------------------- parameters */

PyObject *
n4p_w_param_get(FASTCALL_ARGS)
{
    static const char *const kw[] = {"h", "max_len", NULL};
    PyObject *a[2];
    PARSE("param_get", kw, 2, 2, a);
    GETFN(ncclParamGet);
    void *h;
    int max_len;
    if (n4p_arg_ptr(a[0], "h", &h) < 0 || n4p_arg_int(a[1], "max_len", &max_len) < 0)
        return NULL;
    if (max_len < 0) {
        PyErr_SetString(PyExc_ValueError, "max_len must be >= 0");
        return NULL;
    }
    char *buf = PyMem_Malloc(max_len ? (size_t)max_len : 1);
    if (buf == NULL)
        return PyErr_NoMemory();
    int len = 0;
    ncclResult_t r;
    CALL(fn((ncclParamHandle_t)h, buf, max_len, &len));
    PyObject *res = NULL;
    if (n4p_status_failed(r))
        n4p_raise_status(mod, r);
    else if (len < 0 || len > max_len)
        PyErr_Format(PyExc_SystemError, "ncclParamGet reported %d bytes for max_len %d", len,
                     max_len);
    else
        res = PyBytes_FromStringAndSize(buf, len);
    PyMem_Free(buf);
    return res;
}

PyObject *
n4p_w_param_get_parameter(FASTCALL_ARGS)
{
    static const char *const kw[] = {"key", NULL};
    PyObject *a[1];
    PARSE("param_get_parameter", kw, 1, 1, a);
    GETFN(ncclParamGetParameter);
    const char *key, *value = NULL;
    int len = 0;
    if (n4p_arg_cstr(a[0], "key", &key) < 0)
        return NULL;
    ncclResult_t r;
    CALL(fn(key, &value, &len));
    if (r == ncclInvalidArgument) { /* the library knows no such key */
        PyErr_SetObject(PyExc_KeyError, a[0]);
        return NULL;
    }
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    if (value == NULL)
        return PyUnicode_FromString("");
    if (len < 0 || (size_t)len > strlen(value))
        len = (int)strlen(value); /* the text ends at its NUL whatever the length says */
    return PyUnicode_DecodeUTF8(value, len, "replace");
}

PyObject *
n4p_w_param_get_all_keys(FASTCALL_ARGS)
{
    PARSE("param_get_all_keys", NULL, 0, 0, NULL);
    GETFN(ncclParamGetAllParameterKeys);
    const char **table = NULL;
    int n = 0;
    ncclResult_t r;
    CALL(fn(&table, &n));
    if (n4p_status_failed(r))
        return n4p_raise_status(mod, r);
    if (n < 0 || (n > 0 && table == NULL)) {
        PyErr_Format(PyExc_SystemError, "ncclParamGetAllParameterKeys returned %d keys at %p", n,
                     (void *)table);
        return NULL;
    }
    PyObject *res = PyList_New(n);
    for (int i = 0; res != NULL && i < n; i++) {
        PyObject *k = n4p_str_result(table[i]);
        if (k == NULL)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, k);
    }
    return res;
}
