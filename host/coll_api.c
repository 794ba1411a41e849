/*
 * coll_api.c - the collectives' entry points (ncclAllReduce, ...) and the
 * checks of their arguments, before anything is queued (group.c).  The
 * sizes of each kind's buffers are its row in kinds.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "entry.h"

static ncclResult_t check_and_submit(int kind, const void *sendbuff,
                                     void *recvbuff, size_t count, int dtype,
                                     int op, int root, ncclComm_t comm,
                                     const void *acc);

static ncclResult_t submit_coll(int kind, const void *sendbuff, void *recvbuff,
                                size_t count, int dtype, int op, int root,
                                ncclComm_t comm, const void *acc)
{
    return n4p_group_note(check_and_submit(kind, sendbuff, recvbuff, count, dtype,
                                           op, root, comm, acc));
}

static ncclResult_t check_and_submit(int kind, const void *sendbuff, void *recvbuff,
                                size_t count, int dtype, int op, int root,
                                ncclComm_t comm, const void *acc)
{
    const char *name = n4p_kind_name(kind);
    size_t esz;
    ncclResult_t rc = n4p_check_call(comm, name, dtype, &esz);
    if (rc != ncclSuccess)
        return rc;
    if (n4p_is_reduction(kind)) {
        if (op < 0 || (op >= ncclNumOps && op - ncclNumOps >= comm->nops))
            return n4p_fail(comm, ncclInvalidArgument,
                            "%s: invalid reduction op %d", name, op);
        rc = n4p_check_redop(comm, op, dtype);
        if (rc != ncclSuccess)
            return rc;
    }
    const int n = comm->nranks, r = comm->rank;
    if (n4p_is_rooted(kind) && (root < 0 || root >= n))
        return n4p_fail(comm, ncclInvalidArgument,
                        "%s: root %d is out of range for %d ranks", name, root, n);
    if (count > SIZE_MAX / esz / (size_t)n)
        return n4p_fail(comm, ncclInvalidArgument, "%s: count %zu is too large",
                        name, count);
    const n4p_kind *k = n4p_kind_of(kind);
    const size_t ns = n4p_span_elems(k->send, count, n, r == root);
    const size_t nr = n4p_span_elems(k->recv, count, n, r == root);
    if (ns > 0 && sendbuff == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: sendbuff is NULL", name);
    if (nr > 0 && recvbuff == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: recvbuff is NULL", name);
    if (n4p_span_elems(k->bias, count, n, r == root) > 0 && acc == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "%s: acc is NULL", name);
    return n4p_submit_data(kind, comm, sendbuff, recvbuff, count, dtype, op, root, acc);
}

/* A collective with a config form: its parameters are the API table's
 * (src/gen/host_api_decls.h); it submits `cnt` elements with `op_` and `root_` (0 and -1
 * where it has none). */
#define HOST_COLL(name, kind, cnt, op_, root_)                                       \
    N4P_EXPORT ncclResult_t name(N4P_PARAMS_##name)                                  \
    {                                                                                \
        (void)stream;                                                                \
        return submit_coll(kind, sendbuff, recvbuff, cnt, datatype, op_, root_, comm, \
                           NULL);                                                    \
    }

HOST_COLL(ncclAllReduce, N4P_K_ALLREDUCE, count, op, -1)
HOST_COLL(ncclReduce, N4P_K_REDUCE, count, op, root)
HOST_COLL(ncclBroadcast, N4P_K_BROADCAST, count, 0, root)
HOST_COLL(ncclAllGather, N4P_K_ALLGATHER, sendcount, 0, -1)
HOST_COLL(ncclReduceScatter, N4P_K_REDUCESCATTER, recvcount, op, -1)
HOST_COLL(ncclAlltoAll, N4P_K_ALLTOALL, count, 0, -1)
HOST_COLL(ncclGather, N4P_K_GATHER, count, 0, root)
HOST_COLL(ncclScatter, N4P_K_SCATTER, count, 0, root)

N4P_EXPORT ncclResult_t ncclAllReduceWithBias(const void *sendbuff, void *recvbuff,
                                              size_t count, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream, const void *acc)
{
    (void)stream;
    return submit_coll(N4P_K_ALLREDUCE_BIAS, sendbuff, recvbuff, count, datatype,
                       op, -1, comm, acc);
}

N4P_EXPORT ncclResult_t ncclBcast(void *buff, size_t count,
                                  ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return submit_coll(N4P_K_BROADCAST, buff, buff, count, datatype, 0, root, comm,
                       NULL);
}

static ncclResult_t all_to_all_v_submit(const void *sendbuff,
                                       const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuff,
                                       const size_t *recvcounts,
                                       const size_t *rdispls,
                                       ncclDataType_t datatype, ncclComm_t comm)
{
    const char *name = "ncclAllToAllv";
    size_t esz;
    ncclResult_t rc = n4p_check_call(comm, name, (int)datatype, &esz);
    if (rc != ncclSuccess)
        return rc;
    if (sendcounts == NULL || sdispls == NULL || recvcounts == NULL ||
        rdispls == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "%s: a count or displacement array is NULL", name);
    const size_t n = (size_t)comm->nranks;
    size_t stot = 0, rtot = 0;
    for (size_t i = 0; i < n; i++) {
        if (sendcounts[i] > SIZE_MAX / esz / 4 || recvcounts[i] > SIZE_MAX / esz / 4 ||
            sdispls[i] > SIZE_MAX / esz / 4 || rdispls[i] > SIZE_MAX / esz / 4)
            return n4p_fail(comm, ncclInvalidArgument, "%s: count too large", name);
        stot += sendcounts[i];
        rtot += recvcounts[i];
    }
    if ((stot > 0 && sendbuff == NULL) || (rtot > 0 && recvbuff == NULL))
        return n4p_fail(comm, ncclInvalidArgument, "%s: NULL buffer", name);
    size_t *v = malloc(4 * n * sizeof(size_t));
    if (v == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    memcpy(v, sendcounts, n * sizeof(size_t));
    memcpy(v + n, sdispls, n * sizeof(size_t));
    memcpy(v + 2 * n, recvcounts, n * sizeof(size_t));
    memcpy(v + 3 * n, rdispls, n * sizeof(size_t));
    n4p_op o = {.kind = N4P_K_ALLTOALLV,
                .comm = comm,
                .sendbuff = sendbuff,
                .recvbuff = recvbuff,
                .dtype = datatype,
                .root = -1,
                .v = v};
    return n4p_submit(&o); /* takes ownership of v */
}

N4P_EXPORT ncclResult_t ncclAllToAllv(const void *sendbuff, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuff,
                                      const size_t *recvcounts,
                                      const size_t *rdispls,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)stream;
    return n4p_group_note(all_to_all_v_submit(sendbuff, sendcounts, sdispls,
                                              recvbuff, recvcounts, rdispls,
                                              datatype, comm));
}

N4P_EXPORT ncclResult_t ncclAlltoAllv(const void *sendbuff, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuff,
                                      const size_t *recvcounts,
                                      const size_t *rdispls,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream)
{
    return ncclAllToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts,
                         rdispls, datatype, comm, stream);
}
