/*
 * kinds.c - one descriptor per kind of op: what the queue, the entry
 * points and the path policy need to know about it, in one row.
 *
 * The table is built from N4P_HOST_KINDS (internal.h: the kind, its API
 * function and its traits); every kind has a row KIND_<id> below with the
 * rest: the sizes of its buffers (in elements of `count`), its engines
 * (staged, single copy; or the executor of a kind that moves no data), and
 * its path thresholds (policy.c applies them; the measurements behind them
 * are there).  A kind without a row does not compile.  Changing how one
 * collective runs, or when it takes single copy, touches its engine file
 * and its row here, nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>

#include "gen/api_table.h"
#include "engine.h"

/* Each kind's function is an entry of the API table: a name that is not one
 * does not compile. */
#define N4P_KIND_FN(id, fn, traits) \
    _Static_assert(N4P_IDX_##fn >= 0, "N4P_K_" #id ": " #fn " is in the API table");
#define N4P_KIND_OTHER(id, traits)
N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER)
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER

/* With NCCL4PY_HOST_SINGLE_COPY=auto: the smallest block (for an all-reduce
 * and a broadcast: message) tried single copy while every rank has a CPU,
 * and with more ranks than CPUs (policy.c says why these). */
#define TUNED_MIN (N4P_EAGER_BYTES + 1)
#define CROWDED_TUNED_MIN (4u << 20)
#define NEVER SIZE_MAX

/* The rows.  send/recv/bias: the elements of sendbuff, recvbuff and the
 * bias, in units of count (N4P_SPAN_*); staged/direct: the engines (direct: NULL when the
 * kind has no single-copy form); exec: the executor of a kind that is no
 * collective; auto_min/crowded_min: the thresholds above; tune_row: its
 * row of ncclComm.tune when auto measures both paths (-1: never),
 * tune_crowded: also with more ranks than CPUs; vote_slowest: the vote
 * takes the slowest rank's time, not the sum (a staged broadcast's root
 * does not wait for the receivers); overlap: which overlaps of sendbuff
 * and recvbuff single copy can take (N4P_OVERLAP_*). */
#define KIND_ALLREDUCE                                                                  \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_1, .staged = n4p_allreduce_staged,             \
    .direct = n4p_allreduce_direct, .auto_min = 16u << 10,                              \
    .crowded_min = CROWDED_TUNED_MIN, .tune_row = 0, .tune_crowded = true,              \
    .overlap = N4P_OVERLAP_SAME
#define KIND_BROADCAST                                                                  \
    .send = N4P_SPAN_ROOT_1, .recv = N4P_SPAN_1, .staged = n4p_broadcast_staged,        \
    .direct = n4p_broadcast_direct, .auto_min = TUNED_MIN,                              \
    .crowded_min = CROWDED_TUNED_MIN, .tune_row = 3, .tune_crowded = true,              \
    .vote_slowest = true, .overlap = N4P_OVERLAP_ANY
#define KIND_REDUCE                                                                     \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_ROOT_1, .staged = n4p_reduce_staged,           \
    .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_ALLGATHER                                                                  \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_N, .staged = n4p_allgather_staged,             \
    .direct = n4p_allgather_direct, .auto_min = TUNED_MIN,                              \
    .crowded_min = CROWDED_TUNED_MIN, .tune_row = 1, .tune_crowded = true,              \
    .overlap = N4P_OVERLAP_OWN_BLOCK
#define KIND_REDUCESCATTER                                                              \
    .send = N4P_SPAN_N, .recv = N4P_SPAN_1, .staged = n4p_reduce_scatter_staged,        \
    .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_ALLTOALL                                                                   \
    .send = N4P_SPAN_N, .recv = N4P_SPAN_N, .staged = n4p_alltoall_staged,              \
    .direct = n4p_alltoall_direct, .auto_min = TUNED_MIN, .crowded_min = 64u << 10,     \
    .tune_row = 2, .tune_crowded = false, .overlap = N4P_OVERLAP_APART
#define KIND_ALLTOALLV                                                                  \
    .send = N4P_SPAN_NONE, .recv = N4P_SPAN_NONE, .staged = n4p_alltoallv_staged,       \
    .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_GATHER                                                                     \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_ROOT_N, .staged = n4p_gather_staged,           \
    .direct = n4p_gather_direct, .auto_min = 8u << 20, .crowded_min = 4u << 20,         \
    .tune_row = -1, .overlap = N4P_OVERLAP_OWN_BLOCK
#define KIND_SCATTER                                                                    \
    .send = N4P_SPAN_ROOT_N, .recv = N4P_SPAN_1, .staged = n4p_scatter_staged,          \
    .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_ALLREDUCE_BIAS                                                             \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_1, .bias = N4P_SPAN_1,                         \
    .staged = n4p_allreduce_bias_staged,                                                \
    .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_SPLIT .exec = n4p_exec_split, .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_SHRINK .exec = n4p_exec_shrink, .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_GROW .exec = n4p_exec_grow, .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_INIT_WAIT .exec = n4p_exec_join, .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1
#define KIND_SEND                                                                       \
    .send = N4P_SPAN_1, .recv = N4P_SPAN_NONE, .auto_min = NEVER, .crowded_min = NEVER,   \
    .tune_row = -1
#define KIND_RECV                                                                       \
    .send = N4P_SPAN_NONE, .recv = N4P_SPAN_1, .auto_min = NEVER, .crowded_min = NEVER,   \
    .tune_row = -1

#define N4P_KIND_FN(id, fn, tr) [N4P_K_##id] = {.name = #fn, .traits = (tr), KIND_##id},
#define N4P_KIND_OTHER(id, tr) [N4P_K_##id] = {.name = "operation", .traits = (tr), KIND_##id},
static const n4p_kind kinds[N4P_K_COUNT] = {
    [N4P_K_NONE] = {.name = "operation", .auto_min = NEVER, .crowded_min = NEVER, .tune_row = -1},
    N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER)};
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER

const n4p_kind *n4p_kind_of(int kind)
{
    return &kinds[kind > N4P_K_NONE && kind < N4P_K_COUNT ? kind : N4P_K_NONE];
}

size_t n4p_span_elems(int span, size_t count, int nranks, bool root)
{
    switch (span) {
    case N4P_SPAN_1:
        return count;
    case N4P_SPAN_N:
        return count * (size_t)nranks;
    case N4P_SPAN_ROOT_1:
        return root ? count : 0;
    case N4P_SPAN_ROOT_N:
        return root ? count * (size_t)nranks : 0;
    default:
        return 0;
    }
}

bool n4p_kind_scales(const n4p_kind *k)
{
    return k->send == N4P_SPAN_N || k->send == N4P_SPAN_ROOT_N || k->recv == N4P_SPAN_N ||
           k->recv == N4P_SPAN_ROOT_N;
}
