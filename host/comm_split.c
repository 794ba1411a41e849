/*
 * comm_split.c - ncclCommSplit and ncclCommShrink: their arguments checked
 * and the op queued; comm_make.c runs it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "entry.h"

/* ---------------------------------------------------- split and shrink -- */

static ncclResult_t split_submit(ncclComm_t comm, int color, int key,
                                 ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    if (newcomm == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "newcomm pointer is NULL");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return n4p_fail(comm, ncclInvalidArgument,
                        "color %d is negative (use NCCL_SPLIT_NOCOLOR)", color);
    rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    *newcomm = NULL;
    n4p_op o = {.kind = N4P_K_SPLIT, .comm = comm, .color = color, .key = key,
                .newcomm = newcomm};
    return n4p_submit(&o);
}

N4P_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                      ncclComm_t *newcomm, ncclConfig_t *config)
{
    return n4p_group_note(split_submit(comm, color, key, newcomm, config));
}

static ncclResult_t shrink_submit(ncclComm_t comm, int *excludeRanksList,
                                  int excludeRanksCount, ncclComm_t *newcomm,
                                  ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    (void)shrinkFlags; /* nothing is in flight that could be aborted */
    if (newcomm == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "newcomm pointer is NULL");
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == NULL))
        return n4p_fail(comm, ncclInvalidArgument,
                        "bad exclude list (count %d)", excludeRanksCount);
    rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    int *ex = calloc((size_t)comm->nranks, sizeof(int));
    if (ex == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    for (int i = 0; i < excludeRanksCount; i++) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= comm->nranks) {
            free(ex);
            return n4p_fail(comm, ncclInvalidArgument,
                            "excluded rank %d is out of range", r);
        }
        if (r == comm->rank) {
            free(ex);
            return n4p_fail(comm, ncclInvalidArgument,
                            "rank %d calls ncclCommShrink but excludes itself", r);
        }
        ex[r] = 1;
    }
    *newcomm = NULL;
    n4p_op o = {.kind = N4P_K_SHRINK, .comm = comm, .newcomm = newcomm,
                .exclude = ex, .nexclude = comm->nranks};
    return n4p_submit(&o); /* takes ownership of ex */
}

N4P_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                       int excludeRanksCount, ncclComm_t *newcomm,
                                       ncclConfig_t *config, int shrinkFlags)
{
    return n4p_group_note(shrink_submit(comm, excludeRanksList, excludeRanksCount,
                                        newcomm, config, shrinkFlags));
}
