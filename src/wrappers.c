/*
 * wrappers.c - the hand-written wrappers of the API table (flag "hand"):
 * the ones whose logic is no pattern of tools/gen_api.py.  Their names,
 * docstrings and method-table entries are generated like the others'.
 *
 *   comm_init_all   returns a list of ndev new handles (ndev 0: [] without
 *                   a call)
 *   all_to_all_v    four arrays of one entry per rank: their lengths must
 *                   agree with each other and with the communicator's size
 *
 * (group_start, group_end and group_simulate_end are in group.c.)
 */
#include "bindings.h"

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
    if (n4p_status_failed(r)) {
        n4p_raise_status(mod, r);
    } else if ((res = PyList_New(ndev)) != NULL) {
        for (int i = 0; i < ndev; i++) {
            PyObject *h = PyLong_FromVoidPtr(comms[i]);
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
        n4p_arg_int(a[6], "datatype", &dtype) < 0 || n4p_arg_ptr(a[7], "comm", &comm) < 0 ||
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
