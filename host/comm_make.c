/*
 * comm_make.c - running the ops that make communicators: the join of a
 * new one (queued inside a group), split, shrink and grow.  Their entry
 * points and checks are comm_init.c's, comm_split.c's and grow.c's.
 *
 * Split and shrink derive the child's unique id from the parent's secret
 * bytes, a per-communicator call counter and the color (split) or the set
 * of excluded ranks (shrink), so no id has to be exchanged: split exchanges
 * only (color, key) through the parent, in one round checked like a
 * collective, and shrink needs no communication with the parent at all
 * (the excluded ranks may be dead).  A grow's id is derived alike (grow.c
 * has the protocol); the existing ranks first agree in one round on
 * whether the id is right.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "engine.h"

ncclResult_t n4p_exec_join(n4p_op *o)
{
    ncclComm_t c = o->comm;
    c->cur_op = c->init_op;
    ncclResult_t rc = n4p_comm_join(c);
    if (rc != ncclSuccess)
        n4p_comm_failed(c, rc);
    c->cur_op = NULL;
    return rc;
}

/* ---------------------------------------------------- split and shrink -- */

static int cmp_member(const void *a, const void *b)
{
    const int *x = a, *y = b; /* {key, old rank} */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

ncclResult_t n4p_exec_split(n4p_op *o)
{
    ncclComm_t comm = o->comm;
    comm->opseq++;
    const int n = comm->nranks;
    uint64_t gen = comm->nsplit++;
    int *members = malloc(sizeof(int) * 2 * (size_t)n);
    if (members == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    /* The (color, key) exchange is one round, checked like a collective so
     * that mismatched calls are reported. */
    const uint64_t round = comm->epoch;
    ncclResult_t rc = n4p_round_open(comm, o, N4P_REUSE_EAGER, N4P_DIRECT_NO);
    if (rc == ncclSuccess) {
        int32_t *mine = n4p_eager(comm, comm->rank, round);
        mine[0] = o->color;
        mine[1] = o->key;
        rc = n4p_round_close(comm, true, N4P_ALL);
    }
    if (rc != ncclSuccess) {
        free(members);
        return rc;
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        const int32_t *p = n4p_eager(comm, k, round);
        if (o->color != NCCL_SPLIT_NOCOLOR && p[0] == o->color) {
            members[2 * (size_t)m] = p[1];
            members[2 * (size_t)m + 1] = k;
            m++;
        }
    }
    *o->newcomm = NULL;
    if (o->color == NCCL_SPLIT_NOCOLOR) {
        free(members);
        return ncclSuccess;
    }
    qsort(members, (size_t)m, sizeof(int) * 2, cmp_member);
    int newrank = 0;
    for (int i = 0; i < m; i++)
        if (members[2 * i + 1] == comm->rank)
            newrank = i;
    free(members);
    ncclUniqueId id;
    n4p_derive_id(comm->secret, 1, gen, (uint64_t)(uint32_t)o->color, &id);
    rc = n4p_comm_create(o->newcomm, m, &id, newrank, comm->device, true, "ncclCommSplit");
    comm->cur_op = NULL;
    return rc;
}

ncclResult_t n4p_exec_shrink(n4p_op *o)
{
    ncclComm_t comm = o->comm;
    comm->opseq++;
    const int *ex = o->exclude; /* flag per old rank */
    uint64_t gen = comm->nshrink++;
    uint64_t h = 0x736872696e6bull;
    int newn = 0, newrank = 0;
    for (int r = 0; r < comm->nranks; r++) {
        if (ex[r]) {
            h = (h * UINT64_C(0x100000001b3)) ^ (uint64_t)(r + 1);
            continue;
        }
        if (r == comm->rank)
            newrank = newn;
        newn++;
    }
    ncclUniqueId id;
    n4p_derive_id(comm->secret, 2, gen, h, &id);
    comm->cur_op = "ncclCommShrink";
    ncclResult_t rc = n4p_comm_create(o->newcomm, newn, &id, newrank,
                                      comm->device, true, "ncclCommShrink");
    comm->cur_op = NULL;
    return rc;
}

/* ---------------------------------------------------------------- grow -- */

/* What an existing rank tells the others in the exchange. */
enum { PASSED_ID = 1, WRONG_ID = 2, MADE_ID = 4 };

#define KIND_GROW 3 /* n4p_derive_id's kind: 1 split, 2 shrink */

/* The id of the next grow of comm. */
void n4p_grow_id(ncclComm_t comm, ncclUniqueId *out)
{
    n4p_derive_id(comm->secret, KIND_GROW, comm->ngrow, (uint64_t)comm->nranks, out);
    memcpy(out->internal, N4P_ID_GROW_TAG, N4P_ID_TAG_LEN); /* NOLINT(bugprone-not-null-terminated-result): a binary tag */
    int32_t n = comm->nranks;
    memcpy(out->internal + N4P_ID_GROW_NRANKS_OFF, &n, sizeof n);
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
    comm->opseq++;
    ncclUniqueId id;
    n4p_grow_id(comm, &id);
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
