/*
 * teams.c - the host team functions of NCCL's device API (2.28+).
 *
 * A team is a set of world ranks spaced `stride` apart, of which the caller
 * is member `rank` of `nRanks`.  As in NCCL:
 *   world = {nRanks, rank, 1};
 *   lsa   = {lsaSize, lsaRank, 1}   (the ranks that share memory);
 *   rail  = {nRanks / lsaSize, rank / lsaSize, lsaSize}   (one rank per lsa
 *           team: the outer factor of lsa);
 *   member i of a team is world rank  rank + (i - team.rank) * team.stride,
 *   and lsa rank  lsaRank + (i - team.rank) * team.stride.
 * Every rank of this backend is on one machine, so lsa is the world
 * (lsaSize = nRanks, lsaRank = rank) and the rail team holds the caller
 * alone: {1, 0, nRanks}.
 *
 * NCCL computes without checking.  Here a call with an invalid communicator
 * returns the empty team {0, 0, 0}, and a translation whose team is not one
 * of this communicator's (it does not contain the caller as member
 * `team.rank`, or reaches outside the world) or whose rank is not a member
 * returns -1; both record the reason for ncclGetLastError.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "entry.h"

static ncclTeam_t team_of(ncclComm_t comm, bool rail)
{
    ncclTeam_t t = {0, 0, 0};
    if (n4p_check_comm(comm, false) != ncclSuccess)
        return t;
    if (rail) {
        t.nRanks = 1; /* nRanks / lsaSize */
        t.rank = 0;   /* rank / lsaSize */
        t.stride = comm->nranks;
    } else {
        t.nRanks = comm->nranks;
        t.rank = comm->rank;
        t.stride = 1;
    }
    return t;
}

N4P_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm)
{
    return team_of(comm, false);
}

N4P_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm)
{
    return team_of(comm, false);
}

N4P_EXPORT ncclTeam_t ncclTeamRail(ncclComm_t comm)
{
    return team_of(comm, true);
}

/* Member `rank` of `team` as an index into the caller's lsa team or world
 * (the same on one machine), or -1. */
static int translate(const char *fn, ncclComm_t comm, ncclTeam_t team, int rank)
{
    if (n4p_check_comm(comm, false) != ncclSuccess)
        return -1;
    const int64_t n = comm->nranks, me = comm->rank;
    const int64_t first = me - (int64_t)team.rank * team.stride;
    const int64_t last = first + ((int64_t)team.nRanks - 1) * team.stride;
    if (team.nRanks < 1 || team.stride < 1 || team.rank < 0 || team.rank >= team.nRanks ||
        first < 0 || last >= n) {
        n4p_set_error(comm,
                      "%s: team {nRanks %d, rank %d, stride %d} is not a team of this "
                      "communicator (rank %d of %d)",
                      fn, team.nRanks, team.rank, team.stride, comm->rank, comm->nranks);
        return -1;
    }
    if (rank < 0 || rank >= team.nRanks) {
        n4p_set_error(comm, "%s: rank %d is not a member of a team of %d ranks", fn, rank,
                      team.nRanks);
        return -1;
    }
    return (int)(first + (int64_t)rank * team.stride);
}

N4P_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank)
{
    return translate(__func__, comm, team, rank);
}

N4P_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank)
{
    return translate(__func__, comm, team, rank);
}
