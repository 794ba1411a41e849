/*
 * transport.h - the transport floor of the host backend: unique ids
 * (ids.c), the shared segment (shm.c, shmspace.c), the processes
 * (proc.c), waiting and failure detection (sync.c), the round protocol
 * (rounds.c), reading and writing the peers' memory (cma.c), copies
 * (copy.c), and the life of a communicator's state (comm_life.c).  Nothing
 * here knows a collective's algorithm or its path: the engines (engine.h)
 * do.
 */
#ifndef N4P_HOST_TRANSPORT_H
#define N4P_HOST_TRANSPORT_H

#include "internal.h"

#pragma GCC visibility push(hidden)

/* copy.c (n4p_copy: internal.h) */
bool n4p_streaming(ncclComm_t comm, size_t out_bytes);
/* whether the CPU's string copy from src to dst is slow (its distance) */
bool n4p_slow_distance(uint64_t dst, uint64_t src);

/* cma.c */
void n4p_cma_probe(ncclComm_t comm);
ncclResult_t n4p_cma_read(ncclComm_t c, int peer, void *dst, uint64_t src, size_t n,
                          bool stream);
ncclResult_t n4p_cma_write(ncclComm_t c, int peer, uint64_t dst, const void *src, size_t n);
size_t n4p_cma_push_bytes(ncclComm_t c, size_t bytes);

/* ids.c */
ncclResult_t n4p_random_id(ncclUniqueId *id);
void n4p_derive_id(const unsigned char *secret, uint64_t kind, uint64_t counter,
                   uint64_t extra, ncclUniqueId *out);
bool n4p_id_valid(const ncclUniqueId *id); /* made by this backend (either tag) */
bool n4p_id_is_grow(const ncclUniqueId *id);

/* shm.c */
ncclResult_t n4p_seg_attach(ncclComm_t comm, const ncclUniqueId *id);
void n4p_seg_unlink(ncclComm_t comm);
void n4p_seg_detach(ncclComm_t comm);

/* proc.c */
uint64_t n4p_proc_starttime(pid_t pid, char *state);
bool n4p_process_gone(int32_t pid, uint64_t starttime);

/* shmspace.c: reserve the memory of a segment before it is touched; a
 * shortage is an ncclSystemError naming /dev/shm and the bytes */
ncclResult_t n4p_space_head(ncclComm_t comm, int fd, void *base, const n4p_seg_hdr *h);
ncclResult_t n4p_space_body(ncclComm_t comm, int fd, void *base, const n4p_seg_hdr *h);
/* the ring from this rank to `peer`, before the first send to it */
ncclResult_t n4p_space_ring(ncclComm_t comm, int peer);
/* whether [p, p + n) of this process faults when written (or read): 0 or an errno */
int n4p_space_probe(const void *p, size_t n, bool write);

/* sync.c */
typedef bool (*n4p_pred)(void *ctx);
#define N4P_NO_PEER_CHECK (-2) /* the predicate checks peers itself */
/* One wait: until `done`; `peer` is the rank whose liveness to check (-1:
 * all, N4P_NO_PEER_CHECK: none); `missing` tells which ranks the wait is
 * for, to report a long wait. */
typedef struct {
    n4p_pred done;
    bool (*missing)(void *ctx, int rank);
    void *ctx;
    int peer;
    const char *what;
} n4p_waitfor;
double n4p_now(void);
void n4p_notify(ncclComm_t comm);
void n4p_wake_all(ncclComm_t comm);
ncclResult_t n4p_wait(ncclComm_t comm, const n4p_waitfor *w);
#define N4P_ALL (-1)     /* every rank */
#define N4P_NOBODY (-3)  /* no rank */
void n4p_arrive(ncclComm_t comm);
ncclResult_t n4p_wait_arrived(ncclComm_t comm, int peer, uint64_t target, const char *what);
ncclResult_t n4p_wait_joined(ncclComm_t comm); /* every rank has attached */
void n4p_poison(ncclComm_t comm, ncclResult_t rc);
ncclResult_t n4p_check_poison(ncclComm_t comm);
ncclResult_t n4p_check_call_outcome(ncclComm_t comm);
ncclResult_t n4p_check_peer(ncclComm_t comm, int peer, const char *what);
bool n4p_interrupted(void);
/* Group execution: the threads running one group share a cancel flag. */
void n4p_set_cancel_flag(_Atomic int *flag, bool helper);

/* rounds.c */
#define N4P_REUSE_SETS 2u          /* the two sets of staging slots alternate */
#define N4P_REUSE_EAGER N4P_DEPTH  /* eager entries and descriptions: a ring */
void *n4p_eager(ncclComm_t c, int k, uint64_t round);
ncclResult_t n4p_round_open(ncclComm_t c, const n4p_op *o, unsigned reuse, int direct);
ncclResult_t n4p_round_close(ncclComm_t c, bool check, int from);

/* comm_life.c */
ncclResult_t n4p_comm_create(ncclComm_t *out, int nranks, const ncclUniqueId *id,
                             int rank, int device, bool wait, const char *op);
/* wait until every rank has attached, then remove the name and probe */
ncclResult_t n4p_comm_join(ncclComm_t comm);
void n4p_comm_free(ncclComm_t comm);

#pragma GCC visibility pop

static inline void *n4p_slot(ncclComm_t c, int set, int k)
{
    size_t s = c->seg.slot_bytes;
    return c->seg.coll + ((size_t)set * (size_t)(c->nranks + 1) + (size_t)k) * s;
}

#endif /* N4P_HOST_TRANSPORT_H */
