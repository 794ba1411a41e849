/*
 * run.c - running an op (group.c runs an op at once outside a group, and a
 * group's ops at its end): resolving its reduction, then its kind's
 * executor or engines.
 *
 * An op runs by its kind's descriptor (kinds.c): a kind that is no
 * collective (the join of a new communicator, split, shrink, grow) by its
 * executor; a collective by its single-copy engine when the path policy
 * (policy.c) picks single copy and every rank can take part, else by its
 * staged engine.  Sends and receives run as one batch (p2p.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "queue.h"

/* The PreMulSum op `op` of comm, if it was created for `dtype`; with rs,
 * its scalar goes there (a ncclScalarDevice scalar is read now). */
static ncclResult_t custom_op(ncclComm_t comm, int op, int dtype, n4p_redspec *rs)
{
    int idx = op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    bool ok = op >= ncclNumOps && idx < comm->nops && comm->ops[idx].used;
    n4p_custom_op c;
    if (ok)
        c = comm->ops[idx];
    pthread_mutex_unlock(&comm->lock);
    if (!ok)
        return n4p_fail(comm, ncclInvalidArgument, "invalid reduction op %d", op);
    if (c.dtype != dtype)
        return n4p_fail(comm, ncclInvalidArgument,
                        "PreMulSum op %d was created for %s but used with %s", op,
                        n4p_dtype_name(c.dtype), n4p_dtype_name(dtype));
    if (rs != NULL) {
        rs->op = N4P_OP_PREMUL;
        memcpy(rs->scalar, c.residence == ncclScalarHostImmediate ? c.scalar : c.ptr,
               n4p_dtype_size(dtype));
    }
    return ncclSuccess;
}

ncclResult_t n4p_check_redop(ncclComm_t comm, int op, int dtype)
{
    return op >= 0 && op < ncclNumOps ? ncclSuccess : custom_op(comm, op, dtype, NULL);
}

/* Resolve `op` for one call; reads a ncclScalarDevice scalar now. */
ncclResult_t n4p_resolve_op(ncclComm_t comm, int op, int dtype, n4p_redspec *rs)
{
    memset(rs, 0, sizeof *rs);
    rs->dtype = dtype;
    rs->nranks = comm->nranks;
    if (op >= 0 && op < ncclNumOps) {
        rs->op = op;
        return ncclSuccess;
    }
    return custom_op(comm, op, dtype, rs);
}

static ncclResult_t run_collective(ncclComm_t c, const n4p_op *o, const n4p_kind *k)
{
    n4p_redspec rs;
    ncclResult_t rc;
    c->opseq++;
    if ((rc = n4p_check_poison(c)) != ncclSuccess) /* a rank failed earlier */
        return rc;
    if (o->count == 0 && !(k->traits & N4P_KT_VCOUNTS))
        return ncclSuccess;
    if (k->traits & N4P_KT_OP) {
        rc = n4p_resolve_op(c, o->op, o->dtype, &rs);
        if (rc != ncclSuccess)
            return rc;
    }
    bool done = false;
    c->tune_at = NULL; /* n4p_path_choice sets it when this call is measured */
    if (k->direct != NULL) {
        int choice;
        rc = n4p_path_choice(c, o, k, &choice);
        if (rc == ncclSuccess && choice != N4P_DIRECT_NO)
            rc = n4p_direct_run(c, o, &rs, choice, k->direct, &done);
        if (rc != ncclSuccess)
            return rc;
    }
    if (!done)
        rc = k->staged != NULL
                 ? k->staged(c, o, &rs)
                 : n4p_fail(c, ncclInternalError, "unknown operation kind %d", o->kind);
    if (rc == ncclSuccess)
        rc = n4p_check_call_outcome(c); /* a peer failed this call */
    if (rc == ncclSuccess) {
        n4p_tune_record(c);
        c->cur_op = NULL;
    }
    return rc;
}

ncclResult_t n4p_run_op(n4p_op *o)
{
    const n4p_kind *k = n4p_kind_of(o->kind);
    o->comm->cur_op = k->name;
    o->comm->call_epoch = o->comm->epoch;
    return k->exec != NULL ? k->exec(o) : run_collective(o->comm, o, k);
}
