/*
 * comm_life.c - the life of a communicator's state: creating it (attach),
 * completing it (join), freeing it.
 *
 * Creation is two steps: attach (create or open the segment and claim the
 * rank; never blocks for long) and join (wait until every rank attached).
 * Outside a group both run in the call.  Inside a group the join is queued
 * and runs at the outermost ncclGroupEnd (comm_init.c), so the classic "one
 * thread, many ranks" pattern (ncclCommInitRank for each rank between
 * GroupStart and GroupEnd) works.  Once every rank has joined, the
 * segment's name is removed and the single-copy transfers are probed
 * (cma.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "transport.h"

void n4p_comm_free(ncclComm_t comm)
{
    n4p_seg_unlink(comm);
    n4p_seg_detach(comm);
    n4p_reg *r = comm->regs;
    while (r != NULL) {
        n4p_reg *next = r->next;
        r->magic = 0;
        free(r->window ? (void *)(struct ncclWindow_vidmem *)r : (void *)r);
        r = next;
    }
    free(comm->ops);
    free(comm->srcs);
    free(comm->pids);
    free(comm->ring_ready);
    free(comm->bounce);
    pthread_mutex_destroy(&comm->lock);
    comm->magic = N4P_COMM_DEAD;
    free(comm);
}

ncclResult_t n4p_comm_create(ncclComm_t *out, int nranks, const ncclUniqueId *id,
                             int rank, int device, bool wait, const char *op)
{
    if (out == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "comm pointer is NULL");
    if (nranks < 1)
        return n4p_fail(NULL, ncclInvalidArgument, "nranks %d is less than 1",
                        nranks);
    if (rank < 0 || rank >= nranks)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "rank %d is out of range for %d ranks", rank, nranks);
    if (id == NULL || !n4p_id_valid(id))
        return n4p_fail(NULL, ncclInvalidArgument,
                        "the unique id was not made by this backend's "
                        "ncclGetUniqueId");
    n4p_settings env;
    ncclResult_t rc = n4p_settings_load(&env);
    if (rc != ncclSuccess)
        return rc;
    n4p_log_version();
    ncclComm_t comm = calloc(1, sizeof *comm);
    if (comm == NULL)
        return n4p_fail(NULL, ncclSystemError, "out of memory");
    comm->magic = N4P_COMM_MAGIC;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->device = device;
    comm->env = env;
    comm->init_op = op;
    comm->cur_op = op;
    pthread_mutex_init(&comm->lock, NULL);
    comm->srcs = calloc((size_t)nranks, sizeof *comm->srcs);
    comm->pids = calloc((size_t)nranks, sizeof *comm->pids);
    comm->ring_ready = calloc((size_t)nranks, 1);
    if (comm->srcs == NULL || comm->pids == NULL || comm->ring_ready == NULL) {
        n4p_comm_free(comm);
        return n4p_fail(NULL, ncclSystemError, "out of memory");
    }
    rc = n4p_seg_attach(comm, id);
    if (rc == ncclSuccess && wait)
        rc = n4p_comm_join(comm);
    if (rc != ncclSuccess) {
        n4p_comm_free(comm);
        return rc;
    }
    comm->cur_op = NULL;
    *out = comm;
    return ncclSuccess;
}

ncclResult_t n4p_comm_join(ncclComm_t comm)
{
    ncclResult_t rc = n4p_wait_joined(comm);
    n4p_seg_unlink(comm); /* complete or failed: the name is not needed */
    if (rc != ncclSuccess)
        return rc;
    comm->joined_all = true;
    n4p_cma_probe(comm);
    n4p_log(N4P_LOG_INFO, comm, "comm %p rank %d nRanks %d - Init COMPLETE", (void *)comm,
            comm->rank, comm->nranks);
    n4p_log(N4P_LOG_INFO, comm,
            "comm %p rank %d nRanks %d host backend: segment %zu bytes, slot %zu bytes, "
            "ring %zu bytes, timeout %g s",
            (void *)comm, comm->rank, comm->nranks, comm->seg.size, comm->seg.slot_bytes,
            comm->seg.ring_bytes, comm->env.timeout);
    return ncclSuccess;
}
