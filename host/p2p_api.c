/*
 * p2p_api.c - ncclSend and ncclRecv: their arguments checked and the op
 * queued (group.c); p2p.c moves the data.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>

#include "entry.h"

static ncclResult_t submit_p2p(int kind, const void *sendbuff, void *recvbuff,
                               size_t count, int dtype, int peer, ncclComm_t comm)
{
    const char *name = n4p_kind_name(kind);
    size_t esz;
    ncclResult_t rc = n4p_check_call(comm, name, dtype, &esz);
    if (rc != ncclSuccess)
        return rc;
    if (peer < 0 || peer >= comm->nranks)
        return n4p_fail(comm, ncclInvalidArgument,
                        "%s: peer %d is out of range for %d ranks", name, peer,
                        comm->nranks);
    if (count > SIZE_MAX / esz)
        return n4p_fail(comm, ncclInvalidArgument, "%s: count %zu is too large",
                        name, count);
    const n4p_kind *k = n4p_kind_of(kind);
    if ((n4p_span_elems(k->send, count, comm->nranks, false) > 0 && sendbuff == NULL) ||
        (n4p_span_elems(k->recv, count, comm->nranks, false) > 0 && recvbuff == NULL))
        return n4p_fail(comm, ncclInvalidArgument, "%s: buffer is NULL", name);
    return n4p_submit_data(kind, comm, sendbuff, recvbuff, count, dtype, 0, peer, NULL);
}

N4P_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count,
                                 ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream)
{
    (void)stream;
    return n4p_group_note(
        submit_p2p(N4P_K_SEND, sendbuff, NULL, count, datatype, peer, comm));
}

N4P_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream)
{
    (void)stream;
    return n4p_group_note(
        submit_p2p(N4P_K_RECV, NULL, recvbuff, count, datatype, peer, comm));
}
