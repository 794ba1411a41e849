/*
 * comm_query.c - what a communicator says about itself (ncclCommCount,
 * ncclCommCuDevice, ncclCommUserRank, ncclCommGetAsyncError,
 * ncclCommQueryProperties, ncclCommMemStats) and its suspension
 * (ncclCommSuspend, ncclCommResume).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "entry.h"

/* ----------------------------------------------------- public: queries -- */

N4P_EXPORT ncclResult_t ncclCommCount(ncclComm_t comm, int *count)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (count == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "count pointer is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommCuDevice(ncclComm_t comm, int *device)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (device == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "device pointer is NULL");
    *device = comm->device;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (rank == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "rank pointer is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                              ncclResult_t *asyncError)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (asyncError == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "asyncError pointer is NULL");
    if (comm->seg.hdr != NULL && atomic_load(&comm->error) == ncclSuccess)
        n4p_check_poison(comm); /* another rank failed: adopt its error */
    *asyncError = (ncclResult_t)atomic_load(&comm->error);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm,
                                                ncclCommProperties_t *props)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (props == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "props pointer is NULL");
    ncclCommProperties_t p;
    memset(&p, 0, sizeof p);
    p.rank = comm->rank;
    p.nRanks = comm->nranks;
    p.cudaDev = comm->device;
    p.nvmlDev = comm->device;
    p.ginType = NCCL_GIN_TYPE_NONE;
    p.nLsaTeams = 1;
    p.railedGinType = NCCL_GIN_TYPE_NONE;
    /* Write only the fields the caller's struct has (its `size`). */
    size_t n = props->size < sizeof p ? props->size : sizeof p;
    size_t head = offsetof(ncclCommProperties_t, rank);
    if (n > head)
        memcpy((char *)props + head, (char *)&p + head, n - head);
    return ncclSuccess;
}

/* ------------------------------------------------ public: suspend etc. -- */

N4P_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    (void)flags;
    comm->suspended = true;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    comm->suspended = false;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat,
                                         uint64_t *value)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (value == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "value pointer is NULL");
    switch ((int)stat) {
    case ncclStatGpuMemSuspend:
        *value = 0; /* nothing is released by a suspend */
        return ncclSuccess;
    case ncclStatGpuMemSuspended:
        *value = comm->suspended ? 1 : 0;
        return ncclSuccess;
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal:
        *value = comm->seg.size;
        return ncclSuccess;
    default:
        return n4p_fail(comm, ncclInvalidArgument, "unknown memory stat %d",
                        (int)stat);
    }
}
