/*
 * checks.c - the checks the entry points share: a communicator that can
 * run an operation, a data call's type, a ncclConfig_t.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>

#include "entry.h"

ncclResult_t n4p_check_comm(ncclComm_t comm, bool for_ops)
{
    if (comm == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "communicator is NULL");
    if (comm->magic != N4P_COMM_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "invalid or destroyed communicator %p", (void *)comm);
    if (!for_ops)
        return ncclSuccess;
    int e = atomic_load(&comm->error);
    if (e != ncclSuccess)
        return n4p_fail(comm, (ncclResult_t)e,
                        "the communicator has failed earlier (%s); destroy or "
                        "abort it",
                        ncclGetErrorString(e));
    if (comm->revoked)
        return n4p_fail(comm, ncclInvalidUsage, "the communicator was revoked");
    if (comm->finalized)
        return n4p_fail(comm, ncclInvalidUsage,
                        "the communicator was finalized");
    if (comm->suspended)
        return n4p_fail(comm, ncclInvalidUsage,
                        "the communicator is suspended");
    return ncclSuccess;
}

ncclResult_t n4p_check_call(ncclComm_t comm, const char *name, int dtype, size_t *esz)
{
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    *esz = n4p_dtype_size(dtype);
    if (*esz == 0)
        return n4p_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", name, dtype);
    return ncclSuccess;
}

ncclResult_t n4p_check_config(const ncclConfig_t *config)
{
    if (config == NULL)
        return ncclSuccess;
    /* Only `size` bytes belong to the caller; magic sits at offset 8. */
    if (config->size < offsetof(ncclConfig_t, version) ||
        config->magic != NCCL_API_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclConfig_t was not initialised (size %zu, magic "
                        "0x%x; expected magic 0x%x)",
                        config->size,
                        config->size >= offsetof(ncclConfig_t, version)
                            ? config->magic
                            : 0u,
                        NCCL_API_MAGIC);
    /* `blocking` and the other fields do not apply: every call completes
     * before it returns. */
    return ncclSuccess;
}
