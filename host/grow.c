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

#include "internal.h"

/* What an existing rank tells the others in the exchange. */
enum { PASSED_ID = 1, WRONG_ID = 2, MADE_ID = 4 };

#define KIND_GROW 3 /* n4p_derive_id's kind: 1 split, 2 shrink */

/* The id of the next grow of comm. */
static void grow_id(ncclComm_t comm, ncclUniqueId *out)
{
    n4p_derive_id(comm->secret, KIND_GROW, comm->ngrow, (uint64_t)comm->nranks, out);
    memcpy(out->internal, N4P_ID_GROW_TAG, N4P_ID_TAG_LEN); /* NOLINT(bugprone-not-null-terminated-result): a binary tag */
    int32_t n = comm->nranks;
    memcpy(out->internal + N4P_ID_GROW_NRANKS_OFF, &n, sizeof n);
}

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
    grow_id(comm, uniqueId);
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

/* The exchange's verdict, alike on every existing rank: ncclSuccess, or the
 * error (and its message). */
static ncclResult_t verdict(ncclComm_t comm, uint64_t round)
{
    int wrong = -1, made = -1, made2 = -1, silent = -1;
    for (int k = 0; k < comm->nranks; k++) {
        const int32_t f = *(const int32_t *)n4p_eager(comm, k, round);
        if ((f & WRONG_ID) && wrong < 0)
            wrong = k;
        if (f & MADE_ID) {
            if (made < 0)
                made = k;
            else if (made2 < 0)
                made2 = k;
            if (!(f & PASSED_ID) && silent < 0)
                silent = k;
        }
    }
    if (wrong >= 0)
        return n4p_fail(comm, ncclInvalidArgument,
                        "ncclCommGrow: rank %d passed a unique id that is not the one "
                        "ncclCommGetUniqueId made for this grow of the communicator",
                        wrong);
    if (made < 0)
        return n4p_fail(comm, ncclInvalidUsage,
                        "ncclCommGrow: no rank of the communicator called ncclCommGetUniqueId "
                        "for this grow; one rank makes the id the new ranks need and passes it");
    if (made2 >= 0)
        return n4p_fail(comm, ncclInvalidUsage,
                        "ncclCommGrow: ranks %d and %d both called ncclCommGetUniqueId; one "
                        "rank (the coordinator) makes the id",
                        made, made2);
    if (silent >= 0)
        return n4p_fail(comm, ncclInvalidUsage,
                        "ncclCommGrow: rank %d made the id with ncclCommGetUniqueId but passed "
                        "none; that rank passes it (the other existing ranks may pass NULL)",
                        silent);
    return ncclSuccess;
}

ncclResult_t n4p_exec_grow(n4p_op *o)
{
    ncclComm_t comm = o->comm;
    ncclUniqueId id;
    grow_id(comm, &id);
    int32_t flags = comm->grow_id_out ? MADE_ID : 0;
    if (o->grow_id != NULL)
        flags |= PASSED_ID | (memcmp(o->grow_id, &id, sizeof id) != 0 ? WRONG_ID : 0);
    const uint64_t round = comm->epoch;
    ncclResult_t rc = n4p_round_open(comm, o, N4P_REUSE_EAGER, N4P_DIRECT_NO);
    if (rc == ncclSuccess) {
        memcpy(n4p_eager(comm, comm->rank, round), &flags, sizeof flags);
        rc = n4p_round_close(comm, true, N4P_ALL);
    }
    if (rc == ncclSuccess)
        rc = verdict(comm, round);
    if (rc != ncclSuccess)
        return rc;
    comm->ngrow++; /* the id is used up */
    comm->grow_id_out = false;
    rc = n4p_comm_create(o->newcomm, (int)o->count, &id, comm->rank, comm->device, true,
                         "ncclCommGrow");
    comm->cur_op = NULL;
    return rc;
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
