/*
 * grow.c - ncclCommGetUniqueId and ncclCommGrow: a larger communicator of
 * the existing ranks and new ones.
 *
 * As in NCCL (2.29 and later): one existing rank, the coordinator, makes an
 * id with ncclCommGetUniqueId and hands it to the new ranks out of band.
 * Then every rank calls ncclCommGrow with the total number of ranks: the
 * existing ranks on their communicator with rank -1 (they keep their ranks;
 * the coordinator passes the id, the others may pass NULL or the id), the
 * new ranks with comm NULL, the id and their rank (from the parent's size
 * up).  Together they form one communicator.
 *
 * The id is derived, like a split's, from the parent's secret bytes and a
 * per-communicator counter of grows, so every existing rank knows it
 * without receiving it.  It carries its own tag and the parent's size, so a
 * new rank can check its arguments at once, and ncclCommInitRank refuses it.
 * The existing ranks first exchange, in one round checked like a
 * collective (so different nRanks are a mismatch), whether each made the id
 * and whether the id it passed is the right one; every existing rank then
 * fails alike when the id is wrong, when no rank or two ranks made one, or
 * when the rank that made it did not pass it.  Those failures leave the id
 * unused and the parent working; once the ranks agree, the id is used up,
 * whether the new communicator then completes or not (a new rank that never
 * arrives is a timeout, NCCL4PY_HOST_TIMEOUT).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "entry.h"

N4P_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    if (uniqueId == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "uniqueId pointer is NULL");
    if (comm->grow_id_out)
        return n4p_fail(comm, ncclInvalidUsage,
                        "ncclCommGetUniqueId: the id this rank made earlier has not been used "
                        "by ncclCommGrow yet (an id serves one grow)");
    n4p_grow_id(comm, uniqueId);
    comm->grow_id_out = true;
    return ncclSuccess;
}

/* ------------------------------------------------------ existing ranks -- */

static ncclResult_t grow_existing(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                  int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    if (newcomm == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "newcomm pointer is NULL");
    *newcomm = NULL;
    if (rank != -1)
        return n4p_fail(comm, ncclInvalidArgument,
                        "ncclCommGrow: an existing rank passes rank -1 (it keeps its rank "
                        "%d); rank %d is for a new rank, which passes comm NULL",
                        comm->rank, rank);
    if (nRanks <= comm->nranks || nRanks > N4P_MAX_RANKS)
        return n4p_fail(comm, ncclInvalidArgument,
                        "ncclCommGrow: nRanks %d must be larger than the communicator's %d "
                        "ranks and at most %d",
                        nRanks, comm->nranks, N4P_MAX_RANKS);
    rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    ncclUniqueId *copy = NULL; /* the caller's id may be gone at the group's end */
    if (uniqueId != NULL) {
        copy = malloc(sizeof *copy);
        if (copy == NULL)
            return n4p_fail(comm, ncclSystemError, "out of memory");
        memcpy(copy, uniqueId, sizeof *copy);
    }
    n4p_op o = {.kind = N4P_K_GROW, .comm = comm, .count = (size_t)nRanks,
                .newcomm = newcomm, .grow_id = copy};
    return n4p_submit(&o); /* takes ownership of copy */
}

/* ----------------------------------------------------------- new ranks -- */

static ncclResult_t grow_new(int nRanks, const ncclUniqueId *uniqueId, int rank,
                             ncclComm_t *newcomm, ncclConfig_t *config)
{
    if (newcomm == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "newcomm pointer is NULL");
    *newcomm = NULL;
    ncclResult_t rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    if (uniqueId == NULL || !n4p_id_is_grow(uniqueId))
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclCommGrow: a new rank (comm NULL) passes the unique id that "
                        "ncclCommGetUniqueId made on the communicator; %s",
                        uniqueId == NULL       ? "it passed none"
                        : n4p_id_valid(uniqueId) ? "this one is from ncclGetUniqueId"
                                               : "this one was not made by this backend");
    int32_t old;
    memcpy(&old, uniqueId->internal + N4P_ID_GROW_NRANKS_OFF, sizeof old);
    if (old < 1 || old >= N4P_MAX_RANKS)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclCommGrow: the unique id is damaged (it names a communicator of "
                        "%d ranks)",
                        (int)old);
    if (nRanks <= old || nRanks > N4P_MAX_RANKS)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclCommGrow: nRanks %d must be larger than the %d ranks of the "
                        "communicator that made the id, and at most %d",
                        nRanks, (int)old, N4P_MAX_RANKS);
    if (rank < old || rank >= nRanks)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclCommGrow: a new rank's rank must be from %d to %d (the existing "
                        "ranks keep 0 to %d); got %d",
                        (int)old, nRanks - 1, (int)old - 1, rank);
    return n4p_init_rank(newcomm, nRanks, uniqueId, rank, "ncclCommGrow");
}

N4P_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                     int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    return n4p_group_note(comm != NULL
                              ? grow_existing(comm, nRanks, uniqueId, rank, newcomm, config)
                              : grow_new(nRanks, uniqueId, rank, newcomm, config));
}
