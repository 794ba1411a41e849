/*
 * redop.c - ncclRedOpCreatePreMulSum and ncclRedOpDestroy: the
 * communicator's PreMulSum ops (a call resolves its op in run.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "entry.h"

/* --------------------------------------------------- PreMulSum ops -- */

N4P_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                 ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence,
                                                 ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (op == NULL || scalar == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "NULL op or scalar pointer");
    if (n4p_dtype_size(datatype) == 0)
        return n4p_fail(comm, ncclInvalidArgument, "invalid datatype %d",
                        (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return n4p_fail(comm, ncclInvalidArgument, "invalid scalar residence %d",
                        (int)residence);
    pthread_mutex_lock(&comm->lock);
    int idx = -1;
    for (int i = 0; i < comm->nops; i++)
        if (!comm->ops[i].used) {
            idx = i;
            break;
        }
    if (idx < 0) {
        n4p_custom_op *grown =
            realloc(comm->ops, sizeof *grown * (size_t)(comm->nops + 8));
        if (grown == NULL) {
            pthread_mutex_unlock(&comm->lock);
            return n4p_fail(comm, ncclSystemError, "out of memory");
        }
        memset(grown + comm->nops, 0, sizeof *grown * 8);
        comm->ops = grown;
        idx = comm->nops;
        comm->nops += 8;
    }
    n4p_custom_op *c = &comm->ops[idx];
    memset(c, 0, sizeof *c);
    c->used = true;
    c->dtype = datatype;
    c->residence = residence;
    if (residence == ncclScalarHostImmediate)
        memcpy(c->scalar, scalar, n4p_dtype_size(datatype));
    else
        c->ptr = scalar;
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)(ncclNumOps + idx);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    int idx = (int)op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    bool ok = (int)op >= ncclNumOps && idx < comm->nops && comm->ops[idx].used;
    if (ok)
        comm->ops[idx].used = false;
    pthread_mutex_unlock(&comm->lock);
    if (!ok)
        return n4p_fail(comm, ncclInvalidArgument,
                        "reduction op %d is not a PreMulSum op of this "
                        "communicator",
                        (int)op);
    return ncclSuccess;
}
