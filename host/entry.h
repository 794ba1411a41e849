/*
 * entry.h - the entry floor: the checks the exported functions share
 * (comm_query.c) and the creation of a rank's communicator (comm_init.c).
 */
#ifndef N4P_HOST_ENTRY_H
#define N4P_HOST_ENTRY_H

#include "queue.h"

#pragma GCC visibility push(hidden)

/* comm_query.c */
ncclResult_t n4p_check_comm(ncclComm_t comm, bool for_ops);
/* The checks every data call (`name`) starts with: the communicator can run
 * it and `dtype` is a data type, whose element size goes to *esz. */
ncclResult_t n4p_check_call(ncclComm_t comm, const char *name, int dtype, size_t *esz);
ncclResult_t n4p_check_config(const ncclConfig_t *config);

/* comm_init.c: create now, and join now or (in a group) at the outermost
 * ncclGroupEnd */
ncclResult_t n4p_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                           const char *op);

#pragma GCC visibility pop

#endif /* N4P_HOST_ENTRY_H */
