/*
 * queue.h - the queue floor: building an op from a checked call, queueing
 * it in a group or running it at once (group.c), and running it by its
 * kind's descriptor (run.c).
 */
#ifndef N4P_HOST_QUEUE_H
#define N4P_HOST_QUEUE_H

#include "engine.h"

#pragma GCC visibility push(hidden)

/* run.c */
/* whether `op` is a reduction of comm usable with `dtype` */
ncclResult_t n4p_check_redop(ncclComm_t comm, int op, int dtype);
/* resolve it for one run; reads a ncclScalarDevice scalar now */
ncclResult_t n4p_resolve_op(ncclComm_t comm, int op, int dtype, n4p_redspec *rs);
/* run one op that is no send or receive (those: n4p_exec_p2p) */
ncclResult_t n4p_run_op(n4p_op *o);

/* group.c */
/* submit a checked data call (root: the peer of send/recv) */
ncclResult_t n4p_submit_data(int kind, ncclComm_t comm, const void *sendbuff, void *recvbuff,
                             size_t count, int dtype, int op, int root, const void *acc);
/* run `o` now, or queue it until the outermost ncclGroupEnd; either way it
 * owns the op's arrays from here on */
ncclResult_t n4p_submit(const n4p_op *o);
/* an entry point's result: inside a group the first failure fails it */
ncclResult_t n4p_group_note(ncclResult_t rc);
bool n4p_in_group(void);

#pragma GCC visibility pop

#endif /* N4P_HOST_QUEUE_H */
