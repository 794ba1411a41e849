/*
 * comm_init.c - making and ending communicators: ncclGetUniqueId,
 * ncclCommInitRank (and its Config and Scalable forms), ncclCommInitAll,
 * ncclCommFinalize, ncclCommDestroy, ncclCommAbort, ncclCommRevoke.
 *
 * Creation is two steps (comm_life.c): attach, then join.  Outside a group
 * both run in the call; inside one the join is queued as an op and runs at
 * the outermost ncclGroupEnd, so the classic "one thread, many ranks"
 * pattern (ncclCommInitRank for each rank between GroupStart and GroupEnd)
 * works.  ncclCommInitAll attaches all its ranks, then joins them.
 *
 * ncclCommCuDevice reports the index given to ncclCommInitAll (devlist[i],
 * or i without a devlist); communicators from ncclCommInitRank report 0;
 * split and shrink inherit the parent's value.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <time.h>

#include "entry.h"

/* Attach now; join now, or at the end of the enclosing group. */
ncclResult_t n4p_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                           const char *op)
{
    if (out == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "comm pointer is NULL");
    *out = NULL;
    if (!n4p_in_group())
        return n4p_comm_create(out, nranks, id, rank, 0, true, op);
    ncclComm_t comm = NULL;
    ncclResult_t rc = n4p_comm_create(&comm, nranks, id, rank, 0, false, op);
    if (rc != ncclSuccess)
        return rc;
    n4p_op o = {.kind = N4P_K_INIT_WAIT, .comm = comm};
    rc = n4p_submit(&o);
    if (rc != ncclSuccess) {
        n4p_comm_free(comm);
        return rc;
    }
    *out = comm;
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks,
                              const ncclUniqueId *id, int rank)
{
    if (id != NULL && n4p_id_is_grow(id))
        return n4p_group_note(n4p_fail(NULL, ncclInvalidArgument,
                                       "the unique id was made by ncclCommGetUniqueId, for "
                                       "the new ranks of ncclCommGrow; a new communicator "
                                       "needs one from ncclGetUniqueId"));
    return n4p_group_note(n4p_init_rank(out, nranks, id, rank, "ncclCommInitRank"));
}

/* -------------------------------------------------------- public: init -- */

/* Marker that lets nccl4py tell this backend from NCCL and RCCL (its
 * buffers live in host memory).  Returns the ABI version it follows. */
N4P_EXPORT int nccl4pyHostBackend(void);
N4P_EXPORT int nccl4pyHostBackend(void)
{
    return NCCL4PY_ABI_VERSION_CODE;
}

N4P_EXPORT ncclResult_t ncclGetVersion(int *version)
{
    if (version == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "version pointer is NULL");
    *version = NCCL4PY_ABI_VERSION_CODE;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (uniqueId == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "uniqueId pointer is NULL");
    return n4p_random_id(uniqueId);
}

N4P_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                         ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank);
}

N4P_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                               ncclUniqueId commId, int rank,
                                               ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    return init_rank(comm, nranks, &commId, rank);
}

N4P_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks,
                                                 int myrank, int nId,
                                                 ncclUniqueId *commIds,
                                                 ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    if (nId < 1 || commIds == NULL)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "nId must be >= 1 and commIds non-NULL (nId=%d)", nId);
    /* Every id names the same rendezvous here; the first is enough. */
    return init_rank(newcomm, nranks, &commIds[0], myrank);
}

N4P_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (comms == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "comms pointer is NULL");
    if (ndev < 1)
        return n4p_fail(NULL, ncclInvalidArgument, "ndev %d is less than 1", ndev);
    ncclUniqueId id;
    ncclResult_t rc = n4p_random_id(&id);
    if (rc != ncclSuccess)
        return rc;
    int i;
    for (i = 0; i < ndev; i++)
        comms[i] = NULL;
    for (i = 0; i < ndev && rc == ncclSuccess; i++)
        rc = n4p_comm_create(&comms[i], ndev, &id, i, devlist ? devlist[i] : i,
                             false, "ncclCommInitAll");
    /* All ranks attached from this thread: joining cannot block. */
    for (i = 0; i < ndev && rc == ncclSuccess; i++)
        rc = n4p_comm_join(comms[i]);
    if (rc != ncclSuccess) {
        for (i = 0; i < ndev; i++) {
            if (comms[i] != NULL)
                n4p_comm_free(comms[i]);
            comms[i] = NULL;
        }
    }
    return rc;
}

/* ---------------------------------------------------- public: teardown -- */

N4P_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    /* Nothing is ever pending: every operation completed in its call. */
    comm->finalized = true;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_log(N4P_LOG_INFO, comm, "comm %p rank %d nRanks %d - Destroy COMPLETE", (void *)comm,
            comm->rank, comm->nranks);
    n4p_comm_free(comm);
    return ncclSuccess;
}

/* May be called from another thread while an operation is blocked on the
 * communicator: the waiter notices `aborted` (it is woken through the
 * futex) and returns ncclInvalidUsage; the memory is freed once it is out. */
N4P_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (comm == NULL || comm->magic != N4P_COMM_MAGIC)
        return ncclSuccess;
    atomic_store(&comm->aborted, 1);
    n4p_wake_all(comm);
    while (atomic_load(&comm->busy) != 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    n4p_log(N4P_LOG_INFO, comm, "comm %p rank %d nRanks %d - Abort COMPLETE", (void *)comm,
            comm->rank, comm->nranks);
    n4p_comm_free(comm);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    (void)revokeFlags;
    comm->revoked = true;
    return ncclSuccess;
}
