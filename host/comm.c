/*
 * comm.c - communicator life cycle, queries, split and shrink.
 *
 * Creation is two steps: attach (create or open the segment and claim the
 * rank; never blocks for long) and join (wait until every rank attached).
 * Outside a group both run in the call.  Inside a group the join is queued
 * and runs at the outermost ncclGroupEnd, so the classic "one thread, many
 * ranks" pattern (ncclCommInitRank for each rank between GroupStart and
 * GroupEnd) works.  ncclCommInitAll attaches all its ranks, then joins them.
 *
 * Split and shrink derive the child's unique id from the parent's secret
 * bytes, a per-communicator call counter and the color (split) or the set of
 * excluded ranks (shrink), so no id has to be exchanged: split exchanges only
 * (color, key) through the parent, and shrink needs no communication with
 * the parent at all (the excluded ranks may be dead).
 *
 * ncclCommCuDevice reports the index given to ncclCommInitAll (devlist[i],
 * or i without a devlist); communicators from ncclCommInitRank report 0;
 * split and shrink inherit the parent's value.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ------------------------------------------------------------ helpers -- */

ncclResult_t n4p_check_comm(ncclComm_t comm, bool for_ops)
{
    if (comm == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "communicator is NULL");
    if (comm->magic != N4P_COMM_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "invalid or destroyed communicator %p", (void *)comm);
    if (!for_ops)
        return ncclSuccess;
    int e = atomic_load(&comm->error);
    if (e != ncclSuccess)
        return n4p_fail(comm, (ncclResult_t)e,
                        "the communicator has failed earlier (%s); destroy or "
                        "abort it",
                        ncclGetErrorString(e));
    if (comm->revoked)
        return n4p_fail(comm, ncclInvalidUsage, "the communicator was revoked");
    if (comm->finalized)
        return n4p_fail(comm, ncclInvalidUsage,
                        "the communicator was finalized");
    if (comm->suspended)
        return n4p_fail(comm, ncclInvalidUsage,
                        "the communicator is suspended");
    return ncclSuccess;
}

ncclResult_t n4p_check_call(ncclComm_t comm, const char *name, int dtype, size_t *esz)
{
    ncclResult_t rc = n4p_check_comm(comm, true);
    if (rc != ncclSuccess)
        return rc;
    *esz = n4p_dtype_size(dtype);
    if (*esz == 0)
        return n4p_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", name, dtype);
    return ncclSuccess;
}

ncclResult_t n4p_check_config(const ncclConfig_t *config)
{
    if (config == NULL)
        return ncclSuccess;
    /* Only `size` bytes belong to the caller; magic sits at offset 8. */
    if (config->size < offsetof(ncclConfig_t, version) ||
        config->magic != NCCL_API_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "ncclConfig_t was not initialised (size %zu, magic "
                        "0x%x; expected magic 0x%x)",
                        config->size,
                        config->size >= offsetof(ncclConfig_t, version)
                            ? config->magic
                            : 0u,
                        NCCL_API_MAGIC);
    /* `blocking` and the other fields do not apply: every call completes
     * before it returns. */
    return ncclSuccess;
}

/* Attach now; join now, or at the end of the enclosing group. */
ncclResult_t n4p_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                           const char *op)
{
    if (out == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "comm pointer is NULL");
    *out = NULL;
    if (!n4p_in_group())
        return n4p_comm_create(out, nranks, id, rank, 0, true, op);
    ncclComm_t comm = NULL;
    ncclResult_t rc = n4p_comm_create(&comm, nranks, id, rank, 0, false, op);
    if (rc != ncclSuccess)
        return rc;
    n4p_op o = {.kind = N4P_K_INIT_WAIT, .comm = comm};
    rc = n4p_submit(&o);
    if (rc != ncclSuccess) {
        n4p_comm_free(comm);
        return rc;
    }
    *out = comm;
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks,
                              const ncclUniqueId *id, int rank)
{
    if (id != NULL && n4p_id_is_grow(id))
        return n4p_group_note(n4p_fail(NULL, ncclInvalidArgument,
                                       "the unique id was made by ncclCommGetUniqueId, for "
                                       "the new ranks of ncclCommGrow; a new communicator "
                                       "needs one from ncclGetUniqueId"));
    return n4p_group_note(n4p_init_rank(out, nranks, id, rank, "ncclCommInitRank"));
}

/* -------------------------------------------------------- public: init -- */

/* Marker that lets nccl4py tell this backend from NCCL and RCCL (its
 * buffers live in host memory).  Returns the ABI version it follows. */
N4P_EXPORT int nccl4pyHostBackend(void);
N4P_EXPORT int nccl4pyHostBackend(void)
{
    return NCCL4PY_ABI_VERSION_CODE;
}

N4P_EXPORT ncclResult_t ncclGetVersion(int *version)
{
    if (version == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "version pointer is NULL");
    *version = NCCL4PY_ABI_VERSION_CODE;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (uniqueId == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "uniqueId pointer is NULL");
    return n4p_random_id(uniqueId);
}

N4P_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                         ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank);
}

N4P_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                               ncclUniqueId commId, int rank,
                                               ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    return init_rank(comm, nranks, &commId, rank);
}

N4P_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks,
                                                 int myrank, int nId,
                                                 ncclUniqueId *commIds,
                                                 ncclConfig_t *config)
{
    ncclResult_t rc = n4p_check_config(config);
    if (rc != ncclSuccess)
        return rc;
    if (nId < 1 || commIds == NULL)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "nId must be >= 1 and commIds non-NULL (nId=%d)", nId);
    /* Every id names the same rendezvous here; the first is enough. */
    return init_rank(newcomm, nranks, &commIds[0], myrank);
}

N4P_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (comms == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "comms pointer is NULL");
    if (ndev < 1)
        return n4p_fail(NULL, ncclInvalidArgument, "ndev %d is less than 1", ndev);
    ncclUniqueId id;
    ncclResult_t rc = n4p_random_id(&id);
    if (rc != ncclSuccess)
        return rc;
    int i;
    for (i = 0; i < ndev; i++)
        comms[i] = NULL;
    for (i = 0; i < ndev && rc == ncclSuccess; i++)
        rc = n4p_comm_create(&comms[i], ndev, &id, i, devlist ? devlist[i] : i,
                             false, "ncclCommInitAll");
    /* All ranks attached from this thread: joining cannot block. */
    for (i = 0; i < ndev && rc == ncclSuccess; i++)
        rc = n4p_comm_join(comms[i]);
    if (rc != ncclSuccess) {
        for (i = 0; i < ndev; i++) {
            if (comms[i] != NULL)
                n4p_comm_free(comms[i]);
            comms[i] = NULL;
        }
    }
    return rc;
}

/* ---------------------------------------------------- public: teardown -- */

N4P_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    /* Nothing is ever pending: every operation completed in its call. */
    comm->finalized = true;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_log(N4P_LOG_INFO, comm, "comm %p rank %d nRanks %d - Destroy COMPLETE", (void *)comm,
            comm->rank, comm->nranks);
    n4p_comm_free(comm);
    return ncclSuccess;
}

/* May be called from another thread while an operation is blocked on the
 * communicator: the waiter notices `aborted` (it is woken through the
 * futex) and returns ncclInvalidUsage; the memory is freed once it is out. */
N4P_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (comm == NULL || comm->magic != N4P_COMM_MAGIC)
        return ncclSuccess;
    atomic_store(&comm->aborted, 1);
    n4p_wake_all(comm);
    while (atomic_load(&comm->busy) != 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    n4p_log(N4P_LOG_INFO, comm, "comm %p rank %d nRanks %d - Abort COMPLETE", (void *)comm,
            comm->rank, comm->nranks);
    n4p_comm_free(comm);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    (void)revokeFlags;
    comm->revoked = true;
    return ncclSuccess;
}

/* ----------------------------------------------------- public: queries -- */

N4P_EXPORT ncclResult_t ncclCommCount(ncclComm_t comm, int *count)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (count == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "count pointer is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommCuDevice(ncclComm_t comm, int *device)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (device == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "device pointer is NULL");
    *device = comm->device;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (rank == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "rank pointer is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                              ncclResult_t *asyncError)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (asyncError == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "asyncError pointer is NULL");
    if (comm->seg.hdr != NULL && atomic_load(&comm->error) == ncclSuccess)
        n4p_check_poison(comm); /* another rank failed: adopt its error */
    *asyncError = (ncclResult_t)atomic_load(&comm->error);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm,
                                                ncclCommProperties_t *props)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (props == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "props pointer is NULL");
    ncclCommProperties_t p;
    memset(&p, 0, sizeof p);
    p.rank = comm->rank;
    p.nRanks = comm->nranks;
    p.cudaDev = comm->device;
    p.nvmlDev = comm->device;
    p.ginType = NCCL_GIN_TYPE_NONE;
    p.nLsaTeams = 1;
    p.railedGinType = NCCL_GIN_TYPE_NONE;
    /* Write only the fields the caller's struct has (its `size`). */
    size_t n = props->size < sizeof p ? props->size : sizeof p;
    size_t head = offsetof(ncclCommProperties_t, rank);
    if (n > head)
        memcpy((char *)props + head, (char *)&p + head, n - head);
    return ncclSuccess;
}

/* ------------------------------------------------ public: suspend etc. -- */

N4P_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    (void)flags;
    comm->suspended = true;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    comm->suspended = false;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat,
                                         uint64_t *value)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (value == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "value pointer is NULL");
    switch ((int)stat) {
    case ncclStatGpuMemSuspend:
        *value = 0; /* nothing is released by a suspend */
        return ncclSuccess;
    case ncclStatGpuMemSuspended:
        *value = comm->suspended ? 1 : 0;
        return ncclSuccess;
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal:
        *value = comm->seg.size;
        return ncclSuccess;
    default:
        return n4p_fail(comm, ncclInvalidArgument, "unknown memory stat %d",
                        (int)stat);
    }
}

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

ncclResult_t n4p_exec_shrink(n4p_op *o)
{
    ncclComm_t comm = o->comm;
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

/* --------------------------------------------------- registration etc. -- */

N4P_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "ptr is NULL");
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096u, size ? size : 1) != 0)
        return n4p_fail(NULL, ncclSystemError, "cannot allocate %zu bytes", size);
    *ptr = p;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    free(ptr);
    return ncclSuccess;
}

static n4p_reg *reg_new(ncclComm_t comm, void *buff, size_t size, int flags,
                        bool window)
{
    n4p_reg *r;
    if (window) {
        struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
        r = w ? &w->reg : NULL;
    } else {
        r = calloc(1, sizeof *r);
    }
    if (r == NULL)
        return NULL;
    r->magic = N4P_COMM_MAGIC;
    r->buff = buff;
    r->size = size;
    r->flags = flags;
    r->window = window;
    r->rank = comm->rank;
    pthread_mutex_lock(&comm->lock);
    r->next = comm->regs;
    comm->regs = r;
    pthread_mutex_unlock(&comm->lock);
    return r;
}

/* Unlink and return the registration `r` if `comm` owns it. */
static n4p_reg *reg_take(ncclComm_t comm, const n4p_reg *r, bool window)
{
    pthread_mutex_lock(&comm->lock);
    for (n4p_reg **pp = &comm->regs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r && r->window == window) {
            n4p_reg *found = *pp;
            *pp = found->next;
            pthread_mutex_unlock(&comm->lock);
            return found;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    return NULL;
}

static bool reg_owned(ncclComm_t comm, const n4p_reg *r, bool window)
{
    bool ok = false;
    pthread_mutex_lock(&comm->lock);
    for (n4p_reg *p = comm->regs; p != NULL; p = p->next)
        if (p == r && p->window == window)
            ok = true;
    pthread_mutex_unlock(&comm->lock);
    return ok;
}

N4P_EXPORT ncclResult_t ncclCommRegister(ncclComm_t comm, void *buff, size_t size,
                                         void **handle)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (handle == NULL || (buff == NULL && size > 0))
        return n4p_fail(comm, ncclInvalidArgument,
                        "NULL handle pointer or buffer");
    n4p_reg *r = reg_new(comm, buff, size, 0, false);
    if (r == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    *handle = r;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommDeregister(ncclComm_t comm, void *handle)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_reg *r = reg_take(comm, handle, false);
    if (r == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "handle %p is not registered with this communicator",
                        handle);
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff,
                                               size_t size, ncclWindow_t *win,
                                               int winFlags)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (win == NULL || (buff == NULL && size > 0))
        return n4p_fail(comm, ncclInvalidArgument, "NULL window pointer or buffer");
    n4p_reg *r = reg_new(comm, buff, size, winFlags, true);
    if (r == NULL)
        return n4p_fail(comm, ncclSystemError, "out of memory");
    *win = (struct ncclWindow_vidmem *)r; /* reg is the first member */
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    n4p_reg *r = win ? reg_take(comm, &win->reg, true) : NULL;
    if (r == NULL)
        return n4p_fail(comm, ncclInvalidArgument,
                        "window %p is not registered with this communicator",
                        (void *)win);
    r->magic = 0;
    free(win);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win,
                                          void **outUserPtr)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (outUserPtr == NULL || win == NULL || !reg_owned(comm, &win->reg, true))
        return n4p_fail(comm, ncclInvalidArgument,
                        "unknown window or NULL output pointer");
    *outUserPtr = win->reg.buff;
    return ncclSuccess;
}

/* --------------------------------------------------- PreMulSum ops -- */

N4P_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                 ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence,
                                                 ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    if (op == NULL || scalar == NULL)
        return n4p_fail(comm, ncclInvalidArgument, "NULL op or scalar pointer");
    if (n4p_dtype_size(datatype) == 0)
        return n4p_fail(comm, ncclInvalidArgument, "invalid datatype %d",
                        (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return n4p_fail(comm, ncclInvalidArgument, "invalid scalar residence %d",
                        (int)residence);
    pthread_mutex_lock(&comm->lock);
    int idx = -1;
    for (int i = 0; i < comm->nops; i++)
        if (!comm->ops[i].used) {
            idx = i;
            break;
        }
    if (idx < 0) {
        n4p_custom_op *grown =
            realloc(comm->ops, sizeof *grown * (size_t)(comm->nops + 8));
        if (grown == NULL) {
            pthread_mutex_unlock(&comm->lock);
            return n4p_fail(comm, ncclSystemError, "out of memory");
        }
        memset(grown + comm->nops, 0, sizeof *grown * 8);
        comm->ops = grown;
        idx = comm->nops;
        comm->nops += 8;
    }
    n4p_custom_op *c = &comm->ops[idx];
    memset(c, 0, sizeof *c);
    c->used = true;
    c->dtype = datatype;
    c->residence = residence;
    if (residence == ncclScalarHostImmediate)
        memcpy(c->scalar, scalar, n4p_dtype_size(datatype));
    else
        c->ptr = scalar;
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)(ncclNumOps + idx);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t rc = n4p_check_comm(comm, false);
    if (rc != ncclSuccess)
        return rc;
    int idx = (int)op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    bool ok = (int)op >= ncclNumOps && idx < comm->nops && comm->ops[idx].used;
    if (ok)
        comm->ops[idx].used = false;
    pthread_mutex_unlock(&comm->lock);
    if (!ok)
        return n4p_fail(comm, ncclInvalidArgument,
                        "reduction op %d is not a PreMulSum op of this "
                        "communicator",
                        (int)op);
    return ncclSuccess;
}

/* Resolve `op` for one call; reads a ncclScalarDevice scalar now. */
ncclResult_t n4p_resolve_op(ncclComm_t comm, int op, int dtype, n4p_redspec *rs)
{
    memset(rs, 0, sizeof *rs);
    rs->dtype = dtype;
    rs->nranks = comm->nranks;
    if (op >= 0 && op < ncclNumOps) {
        rs->op = op;
        return ncclSuccess;
    }
    int idx = op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    bool ok = op >= ncclNumOps && idx < comm->nops && comm->ops[idx].used;
    n4p_custom_op c;
    if (ok)
        c = comm->ops[idx];
    pthread_mutex_unlock(&comm->lock);
    if (!ok)
        return n4p_fail(comm, ncclInvalidArgument, "invalid reduction op %d", op);
    if (c.dtype != dtype)
        return n4p_fail(comm, ncclInvalidArgument,
                        "PreMulSum op %d was created for %s but used with %s", op,
                        n4p_dtype_name(c.dtype), n4p_dtype_name(dtype));
    rs->op = N4P_OP_PREMUL;
    memcpy(rs->scalar, c.residence == ncclScalarHostImmediate ? c.scalar : c.ptr,
           n4p_dtype_size(dtype));
    return ncclSuccess;
}

/* ------------------------------------ window device-pointer queries -- */

N4P_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window,
                                                        size_t offset, void **outPtr)
{
    (void)window;
    (void)offset;
    if (outPtr == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "outPtr is NULL");
    *outPtr = NULL; /* no multicast memory on the host */
    return ncclSuccess;
}

static ncclResult_t own_window_ptr(ncclWindow_t window, size_t offset, int rank,
                                   void **out)
{
    if (out == NULL || window == NULL || window->reg.magic != N4P_COMM_MAGIC)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "invalid window or NULL output pointer");
    if (rank != window->reg.rank)
        return n4p_fail(NULL, ncclInvalidUsage,
                        "the memory of rank %d is not mapped in this process "
                        "(the host backend only maps the caller's own window)",
                        rank);
    if (offset > window->reg.size)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "offset %zu is beyond the window size %zu", offset,
                        window->reg.size);
    *out = (char *)window->reg.buff + offset;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset,
                                                int lsaRank, void **outPtr)
{
    return own_window_ptr(window, offset, lsaRank, outPtr);
}

N4P_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset,
                                                 int peer, void **outPtr)
{
    return own_window_ptr(window, offset, peer, outPtr);
}
