/*
 * policy.c - which path a collective takes: staged or single copy.
 *
 * The mechanisms know nothing of this: rounds.c stages, cma.c reads and
 * writes the peers' memory, the engines run either form.  Here: the size
 * thresholds from which single copy is tried (their values are the kinds'
 * rows in kinds.c; the measurements behind them are below), the buffer
 * overlaps it cannot take, and, where neither path is faster everywhere,
 * measuring both during the run and the ranks' vote on the faster one.
 *
 * Measuring.  For some collectives neither path is faster everywhere, and which one
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
 * single copy can pay (below) measures both.
 *
 * With more ranks than CPUs, a rank's time in a call includes the time it
 * waits for a CPU while other ranks run, and a staged call may return
 * before its peers have finished, so per-call times say little about the
 * rate at which calls complete; that rate is bounded by the CPU time all
 * the ranks spend per call, which the waits for a CPU do not inflate.  So
 * there (for the all-gather, broadcast and all-reduce, from 4 MiB: below)
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
#include <unistd.h>

#include "engine.h"

/* Whether the ranks outnumber the online CPUs; the count is the same for
 * every rank of the machine, so all ranks choose alike. */
bool n4p_crowded(ncclComm_t c)
{
    static atomic_long cached;
    long cpus = atomic_load_explicit(&cached, memory_order_relaxed);
    if (cpus == 0) {
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = cpus > 0 ? cpus : 1;
        atomic_store_explicit(&cached, cpus, memory_order_relaxed);
    }
    return c->nranks > cpus;
}

/* The thresholds (the rows of kinds.c).  With NCCL4PY_HOST_SINGLE_COPY=auto,
 * the smallest block a rank reads from one peer (for an all-reduce and a
 * broadcast: the message) from which single copy is tried
 * (bench/host_vs_mpi.py, and the same calls alternating between the two
 * paths, on shared 2-CPU machines).
 *
 * A process_vm_readv copy costs a system call and the pinning of every
 * page it reads, and single copy needs a second synchronisation per call,
 * where staging lets ranks run ahead; staging copies every byte twice and
 * moves every slot, freshly written by one CPU, into another CPU's cache,
 * which on a virtual machine is fast or 2-3x slower from one launch to the
 * next (the host places the virtual CPUs).  How these weigh depends on the
 * CPU: on an AMD EPYC (Zen 3) a read moved about 10 GB/s at best and single
 * copy paid only from blocks of 128 KiB-2 MiB (all-to-all of 128 KiB
 * blocks 16-44 us staged against 21-26 single copy, all-gather of 512 KiB
 * blocks 46-160 against 65-84, all-reduce of 1 MiB 99-368 against
 * 141-359); on an Intel Xeon, two ranks, it paid from the first staged
 * size (broadcast of 32 KiB 4.7 us staged against 2.0, all-gather of 16
 * KiB blocks 4.5 against 2.3, 1 MiB broadcast 71 against 20).  So while
 * every rank has a CPU, an all-gather, all-to-all or broadcast larger than
 * the eager limit, and an all-reduce from 16 KiB (below which its one-round
 * staged form was as fast or faster on both), measures both paths and
 * takes the faster (above).  A gather, whose senders do not wait for the
 * root when staged, pays from 8 MiB blocks.
 *
 * With more ranks than CPUs, a call's time includes the time its rank
 * waits for a CPU, and says little about which path moves more data per
 * second.  There the measurements compare the CPU time the ranks spend instead, and
 * only from 4 MiB blocks (for an all-reduce and a broadcast: messages) for
 * all-gather, broadcast and all-reduce; below, where that measure
 * misjudged the faster path (4 ranks on the Xeon: a 1 MiB broadcast voted
 * single copy, 250 us against 673, and ran 140 us per call staged against
 * 190-290), they stage.  4 ranks on the Xeon, single copy against staging:
 * all-gather of 4 MiB blocks 2.4-2.6 ms against 3.0-4.1, broadcast of 16
 * MiB 1.9-2.1 against 2.5-2.6, all-reduce of 64 MiB 34-37 against 40-41; on
 * the EPYC the all-gather's single copy was 10-25% slower from 16 to 128
 * MiB (3 readers of a block on 2 CPUs pin its pages 3 times, while the
 * staged block is read from the cache), which is why it is measured and
 * not fixed.  The all-to-all and the gather take fixed thresholds: single
 * copy pays early for all-to-all (4 ranks on the Xeon, three launches
 * alternating: 64 KiB blocks 26-31 us against 42-48 staged, 256 KiB
 * 202-210 against 288-322), from 4 MiB blocks for gather. */

#define WARM 3 /* calls of single copy first, on buffers still cold: not measured */
#define RUN 3  /* then calls of each path: the first after the switch is not measured */
#define EXPLORE (WARM + 2 * RUN)
#define CROWDED_EDGE 0.95 /* crowded: staging wins at most this share of single copy's time */

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
static ncclResult_t vote(ncclComm_t c, const n4p_op *o, const n4p_kind *kd, n4p_tune_class *tc,
                         size_t bytes)
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
    const bool slowest = kd->vote_slowest && !crowded;
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

static ncclResult_t tune_pick(ncclComm_t c, const n4p_op *o, const n4p_kind *kd, size_t bytes,
                              int *path)
{
    n4p_tune_class *tc = &c->tune[kd->tune_row][size_class(bytes)];
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
    ncclResult_t rc = phase == EXPLORE ? vote(c, o, kd, tc, bytes) : ncclSuccess;
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

static bool overlap(const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* Whether the call tries single copy, before any measurement: not below
 * the kind's threshold (auto), nor on a rank that cannot read its peers or
 * whose buffers overlap so that a peer's read would see them half written
 * (its veto: every rank then stages). */
static int direct_choice(ncclComm_t c, const n4p_op *o, const n4p_kind *k, size_t blk)
{
    const size_t mode = c->env.single_copy;
    if (mode == 0 || c->nranks < 2 || blk <= N4P_EAGER_BYTES ||
        (mode == N4P_SWITCH_AUTO && blk < (n4p_crowded(c) ? k->crowded_min : k->auto_min)))
        return N4P_DIRECT_NO;
    if (!c->cma)
        return N4P_DIRECT_VETO;
    const bool root = c->rank == o->root;
    const size_t sbytes = n4p_span_elems(k->send, blk, c->nranks, root);
    const size_t rbytes = n4p_span_elems(k->recv, blk, c->nranks, root);
    const void *send = o->sendbuff, *recv = o->recvbuff;
    bool ok = true;
    switch (k->overlap) {
    case N4P_OVERLAP_OWN_BLOCK:
        /* peers read sendbuff while this rank writes the other blocks of
         * recvbuff: in place (its own block) or apart */
        ok = send == (const char *)recv + (size_t)c->rank * blk ||
             !overlap(send, sbytes, recv, rbytes);
        break;
    case N4P_OVERLAP_APART:
        /* in place, a rank would overwrite pieces its peers still read */
        ok = !overlap(send, sbytes, recv, rbytes);
        break;
    case N4P_OVERLAP_SAME:
        /* in place or apart (the all-reduce's reads: allreduce.c) */
        ok = send == recv || !overlap(send, sbytes, recv, rbytes);
        break;
    default:
        break;
    }
    return ok ? N4P_DIRECT_OK : N4P_DIRECT_VETO;
}

ncclResult_t n4p_path_choice(ncclComm_t c, const n4p_op *o, const n4p_kind *k, int *choice)
{
    const size_t blk = o->count * n4p_dtype_size(o->dtype);
    *choice = direct_choice(c, o, k, blk);
    if (k->tune_row < 0 || *choice == N4P_DIRECT_NO || c->env.single_copy != N4P_SWITCH_AUTO ||
        (!k->tune_crowded && n4p_crowded(c))) /* a fixed threshold there */
        return ncclSuccess;
    int path;
    ncclResult_t rc = tune_pick(c, o, k, blk, &path);
    if (rc == ncclSuccess && path == N4P_PATH_STAGED)
        *choice = N4P_DIRECT_NO;
    return rc;
}
