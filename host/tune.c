/*
 * tune.c - choosing between staging and single copy by measuring both.
 *
 * For some collectives neither path is faster everywhere, and which one
 * wins depends on the machine more than on anything the backend can read
 * off it.  On a virtual machine, staging through the segment moves every
 * slot just written by one CPU into another CPU's cache, which costs 2-3x
 * more when the host places the virtual CPUs far apart, and that placement
 * changes from one launch to the next; a single-copy read costs about the
 * same wherever the CPUs lie.  On some CPUs (AMD Zen 3 in bench/README.md)
 * a process_vm_readv moves little more than 10 GB/s and single copy pays
 * only from hundreds of KiB; on others (an Intel Xeon there) its system
 * call and page pinning cost less than the staged path's second copy
 * already at 8 KiB (a 2-rank broadcast of 32 KiB: 2.0 us against 4.7).  So
 * with NCCL4PY_HOST_SINGLE_COPY=auto, while every rank has a CPU, an
 * all-reduce, all-gather, all-to-all or broadcast above the size from which
 * single copy can pay (cma.c) measures both.
 *
 * With more ranks than CPUs, a rank's time in a call includes the time it
 * waits for a CPU while other ranks run, and a staged call may return
 * before its peers have finished, so per-call times say little about the
 * rate at which calls complete; that rate is bounded by the CPU time all
 * the ranks spend per call, which the waits for a CPU do not inflate.  So
 * there (for the all-gather, broadcast and all-reduce, from 4 MiB: cma.c)
 * each rank measures its thread's CPU time instead, and the vote sums it
 * over the ranks for every collective.  A rank that waits for a peer
 * yields its CPU, and that time counts while nothing else is ready to run
 * on the CPU, but not once the rank sleeps: a CPU whose ranks all sleep
 * is idle and the CPU time does not show it.  Staging's ranks sleep more
 * (they run ahead, then wait for the slowest), so there the vote takes
 * staging only when it spends at least 5% less CPU time.  4 ranks on 2
 * CPUs of a Xeon, all-gather of 4 MiB blocks: one launch voted staging
 * with 5.74 ms of CPU time per call against 5.80 and ran 3.4 ms per call
 * against 2.4 in the launches that took single copy.  Over 45 votes at
 * 4-64 MiB (all-gather, broadcast, all-reduce; nine launches) staging
 * spent 3-66% more CPU time than single copy in 43, 1% less in that one,
 * and 22% less in a 4 MiB broadcast whose paths ran alike (0.60 and 0.64
 * ms a call).
 *
 * Per communicator, collective and power-of-two size class (of the
 * message of an all-reduce, of the block of the others), calls are
 * numbered alike on every rank (the ranks call the collectives in the same
 * order).  In every period of N4P_TUNE_PERIOD calls, the first six take
 * single copy and the next three staging; each rank keeps its best time
 * per path over calls 5-6 and 8-9.  The first three are not measured
 * because the first calls on new buffers are slow by either path (the
 * pages are touched, mapped and brought into the caches: a 2-rank 16 MiB
 * all-gather took 2.5, 2.1, 1.6 ms in its first calls and 1.2 ms from the
 * fourth on), and whichever path came first would look slower; nor is the
 * first call after a switch (caches, and the staged path's pipelining
 * across calls).  The tenth begins with a vote: a round in which every
 * rank publishes its two best times in its eager entry and waits for
 * everybody; each rank sums the times over the ranks (for a broadcast:
 * takes the slowest rank's) and takes the path with the smaller sum, so
 * every rank takes the same one, for the rest of the period.  Both paths
 * give the same bits (the all-reduce reduces in rank order on both), so
 * the results do not depend on the choice.  With NCCL_DEBUG=INFO a line
 * reports each choice that differs from the previous one.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define WARM 3 /* calls of single copy first, on buffers still cold: not measured */
#define RUN 3  /* then calls of each path: the first after the switch is not measured */
#define EXPLORE (WARM + 2 * RUN)
#define CROWDED_EDGE 0.95 /* crowded: staging wins at most this share of single copy's time */

/* The tuned collectives' rows of ncclComm.tune, or -1. */
static int row(int kind)
{
    switch (kind) {
    case N4P_K_ALLREDUCE:
        return 0;
    case N4P_K_ALLGATHER:
        return 1;
    case N4P_K_ALLTOALL:
        return 2;
    case N4P_K_BROADCAST:
        return 3;
    default:
        return -1;
    }
}

bool n4p_tuned(ncclComm_t c, int kind, int choice)
{
    return row(kind) >= 0 && choice != N4P_DIRECT_NO &&
           c->env.single_copy == N4P_SWITCH_AUTO &&
           !(kind == N4P_K_ALLTOALL && n4p_crowded(c)); /* fixed threshold: cma.c */
}

/* The clock of the measurements: wall time, or with more ranks than CPUs
 * the calling thread's CPU time. */
static double tune_clock(ncclComm_t c)
{
    struct timespec ts;
    if (!n4p_crowded(c) || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return n4p_now();
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int size_class(size_t bytes)
{
    return bytes > 1 ? 63 - __builtin_clzll((unsigned long long)bytes) : 0;
}

/* The vote: every rank publishes its best times, waits for the others and
 * sums them (a broadcast while every rank has a CPU: takes their maximum). */
static ncclResult_t vote(ncclComm_t c, const n4p_op *o, n4p_tune_class *tc, size_t bytes)
{
    const uint64_t t = c->epoch;
    ncclResult_t rc = n4p_round_open(c, o, N4P_REUSE_EAGER, N4P_DIRECT_VOTE);
    if (rc != ncclSuccess)
        return rc;
    memcpy(n4p_eager(c, c->rank, t), tc->best, sizeof tc->best);
    if ((rc = n4p_round_close(c, true, N4P_ALL)) != ncclSuccess)
        return rc;
    /* A staged broadcast's root does not wait for the receivers, so its
     * time leaves out their copies: there the slowest rank counts (CPU
     * times add up). */
    const bool crowded = n4p_crowded(c);
    const bool slowest = o->kind == N4P_K_BROADCAST && !crowded;
    double sum[2] = {0, 0};
    for (int k = 0; k < c->nranks; k++) {
        double best[2];
        memcpy(best, n4p_eager(c, k, t), sizeof best);
        for (int p = 0; p < 2; p++)
            sum[p] = slowest ? fmax(sum[p], best[p]) : sum[p] + best[p];
    }
    const double edge = crowded ? CROWDED_EDGE : 1.0;
    const int pick = edge * sum[1] < sum[0] ? N4P_PATH_DIRECT : N4P_PATH_STAGED;
    if (!tc->said || pick != tc->pick) {
        const int lg = size_class(bytes);
        n4p_log(N4P_LOG_INFO, c, "comm %p rank %d nRanks %d host backend: %s of %llu-%llu "
                "bytes: %s (best %s per call, %s: staged %.0f us, "
                "single copy %.0f us; measured again every %d calls)",
                (void *)c, c->rank, c->nranks, c->cur_op, 1ull << lg, (2ull << lg) - 1,
                pick == N4P_PATH_DIRECT ? "single copy" : "staged",
                crowded ? "CPU time" : "time",
                slowest ? "of the slowest rank" : "summed over the ranks", sum[0] * 1e6,
                sum[1] * 1e6, N4P_TUNE_PERIOD);
    }
    tc->said = true;
    tc->pick = (uint8_t)pick;
    return ncclSuccess;
}

ncclResult_t n4p_tune_pick(ncclComm_t c, const n4p_op *o, size_t bytes, int *path)
{
    n4p_tune_class *tc = &c->tune[row(o->kind)][size_class(bytes)];
    const uint32_t phase = tc->calls++ % N4P_TUNE_PERIOD;
    c->tune_at = NULL;
    if (phase == 0)
        tc->best[0] = tc->best[1] = INFINITY;
    if (phase < EXPLORE) {
        const uint32_t k = phase < WARM ? 0 : phase - WARM; /* 0 and RUN: not measured */
        *path = phase < WARM + RUN ? N4P_PATH_DIRECT : N4P_PATH_STAGED;
        c->tune_at = k % RUN != 0 ? tc : NULL;
        c->tune_path = *path;
        c->tune_start = c->tune_at != NULL ? tune_clock(c) : 0;
        return ncclSuccess;
    }
    ncclResult_t rc = phase == EXPLORE ? vote(c, o, tc, bytes) : ncclSuccess;
    *path = tc->pick;
    return rc;
}

void n4p_tune_record(ncclComm_t c)
{
    if (c->tune_at == NULL)
        return;
    const double seconds = tune_clock(c) - c->tune_start;
    double *best = &c->tune_at->best[c->tune_path];
    if (seconds < *best)
        *best = seconds;
    c->tune_at = NULL;
}
