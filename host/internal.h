/*
 * internal.h - shared declarations of the host backend (libnccl4py_host.so).
 *
 * The backend implements the NCCL C ABI on host memory.  Ranks are processes
 * (or threads, for ncclCommInitAll) on one machine that meet in a POSIX
 * shared-memory segment named by the unique id.  See engine.h for the
 * overall design and README.md for the user-visible semantics.
 */
#ifndef N4P_HOST_INTERNAL_H
#define N4P_HOST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl_api.h"
#include "gen/host_api_decls.h"

/* Everything declared below is internal to the library, even when it is
 * built without -fvisibility=hidden; the API is exported explicitly. */
#pragma GCC visibility push(hidden)

#define N4P_EXPORT __attribute__((visibility("default")))
#define N4P_PRINTF(a, b) __attribute__((format(printf, a, b)))

#define N4P_CACHELINE 64
#define N4P_ERRLEN 512

/* ------------------------------------------------------------------ ids -- */

/* Layout of the 128-byte ncclUniqueId used by this backend. */
#define N4P_ID_TAG "n4phost1"   /* 8 bytes, recognisable prefix */
#define N4P_ID_TAG_LEN 8
#define N4P_ID_NAME_OFF 8       /* 16 random bytes naming the segment */
#define N4P_ID_NAME_LEN 16
#define N4P_ID_SECRET_OFF 24    /* 32 random bytes, never part of a name */
#define N4P_ID_SECRET_LEN 32
#define N4P_SHM_NAME_MAX 64 /* "/dev/shm/nccl4py-" + 32 hex digits */
/* An id from ncclCommGetUniqueId (grow.c) has its own tag, and the number of
 * ranks of the communicator that made it, as an int32 at this offset. */
#define N4P_ID_GROW_TAG "n4phostg"
#define N4P_ID_GROW_NRANKS_OFF 56

/* ------------------------------------------------------ shared segment -- */

#define N4P_SEG_MAGIC 0x6e34706873656736ull /* "n4phseg6" */
#define N4P_SHM_DIR "/dev/shm"
#define N4P_SHM_PREFIX "nccl4py-"
#define N4P_MAX_RANKS 1024
#define N4P_PAGE 4096u

/* Accepted sizes (also the ranges of NCCL4PY_HOST_SLOT_BYTES / _RING_BYTES). */
#define N4P_MIN_SLOT 4096u
#define N4P_MIN_RING 256u
#define N4P_MAX_BUF (1u << 30)
#define N4P_MAX_SEGMENT (1ull << 40)

/* Rank states.  While a rank fills in its pid the state is minus that pid,
 * so that a rank killed in between can still be recognised as gone. */
enum { N4P_RANK_EMPTY = 0, N4P_RANK_JOINED = 1, N4P_RANK_LEFT = 2 };
#define N4P_RANK_CLAIMING(pid) (-(int32_t)(pid))

/* `poison` value: the failure is described in the header itself (a rank
 * that could not join, e.g. with a different nranks). */
#define N4P_POISON_HDR (-1)

/* Rounds (rounds.c).  A rank may run up to N4P_DEPTH - 2 rounds ahead of
 * the slowest one; each rank has N4P_DEPTH eager entries of
 * N4P_EAGER_BYTES for the data of small collectives, and a ring of as many
 * call descriptions. */
#define N4P_DEPTH 16
#define N4P_EAGER_BYTES 4096u

/* The caller's own name for the data of a collective (set with
 * nccl4pyHostSetCallTag, calltag.c; "" when none), compared like the type:
 * a caller that converts its data before the library sees it (nccl.torch
 * moves int16 as int32 or as bytes, bool as uint8) keeps its mismatches
 * reported. */
#define N4P_TAG_LEN 32

/* What a rank announces at the start of each collective, so that peers can
 * detect mismatched calls (different collective, count, type, tag, op or
 * root). */
typedef struct {
    uint64_t epoch;
    uint64_t count;
    int32_t kind;
    int32_t dtype;
    int32_t op;   /* builtin op, or -1 for any PreMulSum op */
    int32_t root;
    int32_t direct; /* N4P_DIRECT_*: whether this call tries single copy (policy.c) */
    int32_t pad;
    uint64_t sbuf, rbuf; /* the rank's buffers, for peers' single-copy reads */
    uint64_t chain; /* hash of this and every earlier description of the communicator */
    char tag[N4P_TAG_LEN]; /* the caller's tag ("" when none) */
} n4p_desc;

/* n4p_desc.direct */
enum { N4P_DIRECT_NO = 0, N4P_DIRECT_OK = 1, N4P_DIRECT_VETO = 2, N4P_DIRECT_VOTE = 3 };

/* Per-rank control block in the segment.  `seq` is written only by its
 * owner and sits on its own cache line. */
typedef struct {
    _Atomic uint64_t seq;
    char pad0[N4P_CACHELINE - sizeof(uint64_t)];
    _Atomic int32_t state;
    int32_t pid;
    uint64_t starttime; /* from /proc/<pid>/stat, guards against pid reuse */
    uint64_t probe_addr; /* a word of the rank's memory peers read once (cma.c) */
    n4p_desc desc[N4P_DEPTH]; /* indexed by round % N4P_DEPTH */
    _Atomic uint64_t deciding; /* epoch + 1 while the rank waits to learn whose memory a
                                  failed single-copy transfer hit (cma.c), else 0 */
    uint64_t fail_epoch; /* the first round of the call that failed: filled, like
                            errcode and errmsg, before the segment is poisoned */
    int32_t errcode;    /* filled before the segment is poisoned */
    char errmsg[N4P_ERRLEN];
} n4p_rank_ctl;

/* Control words of one point-to-point ring (src -> dst). */
typedef struct {
    _Atomic uint64_t tail; /* bytes written by the sender */
    char pad0[N4P_CACHELINE - sizeof(uint64_t)];
    _Atomic uint64_t head; /* bytes consumed by the receiver */
    char pad1[N4P_CACHELINE - sizeof(uint64_t)];
} n4p_ring_ctl;

/* The first page of a segment.  Everything up to `joined` is written once
 * by the creator before the segment gets its name; a joining rank checks it
 * (shm.c) and from then on uses only its own validated copy. */
typedef struct {
    _Atomic uint64_t ready; /* N4P_SEG_MAGIC once the layout is written */
    int32_t nranks;
    int32_t creator_pid;
    uint64_t creator_start; /* start time of the creator, see n4p_rank_ctl */
    uint64_t pidns;         /* the creator's PID namespace (0: unknown) */
    uint64_t total_bytes;
    uint64_t slot_bytes;  /* collective staging slot, one per rank */
    uint64_t ring_bytes;  /* capacity of each point-to-point ring */
    uint64_t off_ranks;   /* n4p_rank_ctl[nranks] */
    uint64_t off_rings;   /* n4p_ring_ctl[nranks*nranks] */
    uint64_t off_coll;    /* 2 sets of (nranks + 1) slots */
    uint64_t off_eager;   /* N4P_DEPTH eager entries per rank */
    uint64_t off_data;    /* ring buffers, nranks*nranks of ring_bytes */
    _Atomic int32_t joined;
    _Atomic int32_t poison; /* 0, 1 + the rank that reported a failure, or N4P_POISON_HDR */
    _Atomic uint32_t wake;  /* futex word bumped by every notification */
    _Atomic uint32_t sleepers;
    _Atomic int32_t err_claim; /* 1 once a rank owns errcode/errmsg below */
    int32_t errcode;
    char errmsg[N4P_ERRLEN];
} n4p_seg_hdr;

/* A mapped segment.  The sizes are this rank's validated copies: nothing
 * that locates memory is read back from the shared header. */
typedef struct {
    void *base;
    size_t size;
    size_t slot_bytes;
    size_t ring_bytes;
    n4p_seg_hdr *hdr;
    n4p_rank_ctl *ranks;
    n4p_ring_ctl *rings;
    char *coll;
    char *eager;
    char *data;
} n4p_seg;

/* ------------------------------------------------------------ settings -- */

/* The environment, read and validated at communicator creation (env.c). */
typedef struct {
    double timeout;     /* seconds without progress before ncclTimeout; 0: none */
    double wait_report; /* seconds blocked before saying what for; 0: never */
    size_t slot_bytes;  /* 0: automatic */
    size_t ring_bytes;  /* 0: automatic */
    size_t single_copy; /* 0, 1 or N4P_SWITCH_AUTO (policy.c) */
    int debug;          /* NCCL_DEBUG level */
} n4p_settings;

#define N4P_SWITCH_AUTO 2

enum { N4P_LOG_NONE = 0, N4P_LOG_VERSION = 1, N4P_LOG_WARN = 2, N4P_LOG_INFO = 3 };

/* ---------------------------------------------------------- comm state -- */

#define N4P_COMM_MAGIC 0x6e3470636f6d6d31ull
#define N4P_COMM_DEAD 0x6e34706465616431ull

/* Reduction operator as resolved for one call. */
enum { N4P_OP_PREMUL = ncclNumOps }; /* the first value past the built-in ops */
typedef struct {
    int dtype;
    int op;                  /* ncclSum..ncclAvg, or N4P_OP_PREMUL */
    int nranks;              /* divisor of ncclAvg */
    unsigned char scalar[8]; /* PreMulSum scalar, in `dtype` */
} n4p_redspec;

/* Max and min of the floating types (every kernel, reduce.c and lowp_*.c):
 * NaN-propagating (a NaN in either operand wins, the earlier one if both);
 * on equal values (+0 and -0) the later operand wins, which is what NumPy's
 * maximum/minimum give. */
#define N4P_FMAX(a, b) (((a) != (a)) ? (a) : (((b) != (b) || (b) >= (a)) ? (b) : (a)))
#define N4P_FMIN(a, b) (((a) != (a)) ? (a) : (((b) != (b) || (b) <= (a)) ? (b) : (a)))

typedef struct {
    bool used;
    int dtype;
    int residence;
    unsigned char scalar[8];
    const void *ptr; /* ncclScalarDevice: read at each use */
} n4p_custom_op;

typedef struct n4p_reg {
    struct n4p_reg *next;
    uint64_t magic;
    void *buff;
    size_t size;
    int flags;
    int rank; /* rank of the registering communicator */
    bool window;
} n4p_reg;

/* Measurements of one size class of a tuned collective (policy.c). */
#define N4P_TUNE_PERIOD 256
#define N4P_TUNED_KINDS 4 /* the kinds whose rows (kinds.c) have a tune_row */
enum { N4P_PATH_STAGED = 0, N4P_PATH_DIRECT = 1 };
typedef struct {
    uint32_t calls; /* calls of this class so far */
    uint8_t pick;   /* N4P_PATH_*: the last vote's choice */
    bool said;      /* the INFO line on a choice was printed */
    double best[2]; /* this period's best seconds per call, per path */
} n4p_tune_class;

struct ncclComm {
    /* Ordered by alignment (8-byte members, aggregates, 4-byte, 1-byte) so
     * the struct carries no padding beyond its tail. */
    uint64_t magic;
    uint64_t epoch;    /* rounds this rank has arrived at (its seq) */
    uint64_t call_epoch; /* epoch when the running (or the last) call began */
    uint64_t seen_all; /* every rank's seq was at least this */
    uint64_t opseq;    /* operations run, for messages */
    uint64_t nsplit;
    uint64_t nshrink;
    uint64_t ngrow;      /* grows so far: which id the next one uses (grow.c) */
    const char *init_op; /* the call that created it, for messages */
    const char *cur_op;  /* name of the running operation, for messages */
    double spin, spin_max; /* seconds a wait spins before it yields (sync.c) */
    /* what the current wait is for, published every CHECK_PERIOD for
     * nccl4pyHostWaitState (a seqlock: wait_gen, below, is odd while it
     * changes) */
    _Atomic double wait_start, wait_stamp; /* n4p_now(); wait_stamp 0: not waiting */
    const void **srcs;  /* nranks source pointers for the reduce kernels */
    int32_t *pids;      /* the ranks' pids, copied when all joined (cma.c) */
    unsigned char *ring_ready; /* per peer: the ring to it is reserved (shmspace.c) */
    char *bounce;       /* single-copy reads of unfavourable alignment (cma.c) */
    n4p_tune_class *tune_at;    /* the class the running call measures, or NULL */
    double tune_start;          /* and when it chose it (policy.c's clock) */
    n4p_reg *regs;              /* guarded by lock */
    n4p_custom_op *ops;         /* guarded by lock */
    pthread_mutex_t lock;
    n4p_settings env;
    n4p_desc desc;     /* of the running (or the last) collective */
    n4p_seg seg;
    n4p_tune_class tune[N4P_TUNED_KINDS][64]; /* per tuned collective and log2 of bytes (policy.c) */
    int rank;
    int nranks;
    int device;
    _Atomic int error;   /* sticky asynchronous error */
    _Atomic int busy;    /* threads running operations on this comm */
    _Atomic int aborted; /* ncclCommAbort from another thread */
    _Atomic unsigned wait_gen;
    int tune_path;              /* the path the running tuned call takes */
    int nops;
    bool grow_id_out; /* this rank made the next grow's id (ncclCommGetUniqueId) */
    bool joined_all;  /* every rank has attached */
    bool revoked;
    bool suspended;
    bool finalized;
    bool spin_ready;
    bool cma;           /* single-copy reads of every peer work (cma.c) */
    bool said_bounced;  /* the INFO line on a call staged for its alignment was printed */
    unsigned char secret[N4P_ID_SECRET_LEN];
    char shm_name[N4P_SHM_NAME_MAX]; /* path of the segment while this rank may
                                        have to remove it; "" once done */
    char wait_ranks[160];
    char call_tag[N4P_TAG_LEN]; /* given to the collectives submitted next (calltag.c) */
    char errmsg[N4P_ERRLEN];
};

/* A window handle: ncclWindow_t is a pointer to this (opaque to callers). */
struct ncclWindow_vidmem {
    n4p_reg reg;
};

/* ------------------------------------------------------ deferred ops -- */

/* The kinds of deferred op, each once, in the order of their values (from 1):
 * FN(id, function, traits) a kind that is a call of the API table's
 * `function` (the name messages give it; kinds.c checks that the table has
 * it), OTHER(id, traits) one that is no call of its own.  Traits:
 * N4P_KT_OP (it reduces with an op), N4P_KT_ROOT (it has a root),
 * N4P_KT_VCOUNTS (its counts are in arrays: it runs at count 0), N4P_KT_P2P
 * (a send or receive: run together after a group's other ops), N4P_KT_COMM
 * (it completes or makes a communicator: ncclGroupSimulateEnd keeps it),
 * N4P_KT_JOIN (the join of a new communicator: runs first in a group),
 * N4P_KT_RESCUE (it runs after an earlier op of the group failed).  The
 * rest of what a kind needs (its buffers' sizes, its engines, its path
 * thresholds) is its row in kinds.c. */
enum {
    N4P_KT_OP = 1,
    N4P_KT_ROOT = 2,
    N4P_KT_VCOUNTS = 4,
    N4P_KT_P2P = 8,
    N4P_KT_COMM = 16,
    N4P_KT_JOIN = 32,
    N4P_KT_RESCUE = 64,
};
#define N4P_HOST_KINDS(FN, OTHER)                                \
    FN(ALLREDUCE, ncclAllReduce, N4P_KT_OP)                      \
    FN(BROADCAST, ncclBroadcast, N4P_KT_ROOT)                    \
    FN(REDUCE, ncclReduce, N4P_KT_OP | N4P_KT_ROOT)              \
    FN(ALLGATHER, ncclAllGather, 0)                              \
    FN(REDUCESCATTER, ncclReduceScatter, N4P_KT_OP)              \
    FN(ALLTOALL, ncclAlltoAll, 0)                                \
    FN(ALLTOALLV, ncclAllToAllv, N4P_KT_VCOUNTS)                 \
    FN(GATHER, ncclGather, N4P_KT_ROOT)                          \
    FN(SCATTER, ncclScatter, N4P_KT_ROOT)                        \
    FN(ALLREDUCE_BIAS, ncclAllReduceWithBias, N4P_KT_OP)         \
    FN(SPLIT, ncclCommSplit, N4P_KT_COMM)                        \
    FN(SHRINK, ncclCommShrink, N4P_KT_COMM | N4P_KT_RESCUE)      \
    FN(GROW, ncclCommGrow, N4P_KT_COMM)                          \
    OTHER(INIT_WAIT, N4P_KT_COMM | N4P_KT_JOIN)                  \
    FN(SEND, ncclSend, N4P_KT_P2P)                               \
    FN(RECV, ncclRecv, N4P_KT_P2P)

#define N4P_KIND_FN(id, fn, traits) N4P_K_##id,
#define N4P_KIND_OTHER(id, traits) N4P_K_##id,
enum { N4P_K_NONE, N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER) N4P_K_COUNT };
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER

/* A kind's name and traits, for every floor (kinds.c has the rest of its
 * descriptor).  A peer's description may hold any number. */
/* Whether two caller's tags (N4P_TAG_LEN bytes, zero-filled) are the same. */
static inline bool n4p_tag_same(const char *a, const char *b)
{
    for (int i = 0; i < N4P_TAG_LEN; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* A description chain `prev` extended by a caller's tag (FNV-1a over its
 * bytes); untagged calls leave it as it was. */
static inline uint64_t n4p_tag_chain(uint64_t prev, const char *tag)
{
    if (tag[0] == '\0')
        return prev;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < N4P_TAG_LEN && tag[i] != '\0'; i++)
        h = (h ^ (unsigned char)tag[i]) * 1099511628211ull;
    return (prev ^ h) * 0x9e3779b97f4a7c15ull + 1;
}

static inline int n4p_kind_traits(int kind)
{
#define N4P_KIND_FN(id, fn, traits) traits,
#define N4P_KIND_OTHER(id, traits) traits,
    static const int traits[N4P_K_COUNT] = {0, N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER)};
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER
    return kind > N4P_K_NONE && kind < N4P_K_COUNT ? traits[kind] : 0;
}

static inline const char *n4p_kind_name(int kind)
{
#define N4P_KIND_FN(id, fn, traits) #fn,
#define N4P_KIND_OTHER(id, traits) "operation",
    static const char *const names[N4P_K_COUNT] = {
        "operation", N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER)};
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER
    return kind > N4P_K_NONE && kind < N4P_K_COUNT ? names[kind] : "operation";
}

static inline bool n4p_is_reduction(int kind)
{
    return (n4p_kind_traits(kind) & N4P_KT_OP) != 0;
}

static inline bool n4p_is_rooted(int kind)
{
    return (n4p_kind_traits(kind) & N4P_KT_ROOT) != 0;
}

typedef struct {
    int kind;
    ncclComm_t comm;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    int dtype;
    int op;
    int root; /* root, or peer for send/recv */
    const void *acc;
    size_t *v; /* alltoallv: sendcounts, sdispls, recvcounts, rdispls (4*n) */
    /* split / shrink */
    int color;
    int key;
    ncclComm_t *newcomm;
    int *exclude;
    int nexclude;
    ncclUniqueId *grow_id; /* grow: a copy of the id an existing rank passed, or NULL */
    /* p2p progress state */
    uint64_t done_bytes;
    bool hdr_done;
    bool complete;
    int prev; /* index of the previous op to the same peer and direction */
    char tag[N4P_TAG_LEN]; /* the communicator's call tag when it was submitted */
} n4p_op;

/* ---------------------------------------------------------- functions -- */

/* env.c */
ncclResult_t n4p_settings_load(n4p_settings *s);
/* The variables of the table, for the parameter API (params.c). */
#define N4P_ENV_DESCLEN 224
typedef struct {
    const char *name;
    const char *help;
    bool bytes;  /* a whole number: bytes or a switch (else seconds, a double) */
    double dflt; /* the value when unset or empty */
    char accepted[N4P_ENV_DESCLEN];
} n4p_env_param;
size_t n4p_env_count(void);
void n4p_env_describe(size_t i, n4p_env_param *p);
ncclResult_t n4p_env_read(size_t i, double *val, bool *from_env);

/* log.c */
int n4p_debug_level(void); /* NCCL_DEBUG, read once per process */
void n4p_say(const char *fmt, ...) N4P_PRINTF(1, 2);
void n4p_log(int level, ncclComm_t comm, const char *fmt, ...) N4P_PRINTF(3, 4);
void n4p_log_version(void);

/* errors.c */
void n4p_set_error(ncclComm_t comm, const char *fmt, ...) N4P_PRINTF(2, 3);
void n4p_set_error_text(const char *text);
const char *n4p_thread_error(void);
ncclResult_t n4p_fail(ncclComm_t comm, ncclResult_t rc, const char *fmt, ...)
    N4P_PRINTF(3, 4);
ncclResult_t n4p_comm_failed(ncclComm_t comm, ncclResult_t rc);

/* dtypes.c */
size_t n4p_dtype_size(int dtype);
const char *n4p_dtype_name(int dtype);

/* lowp_select.c: the kernels of a 16- or 8-bit float type (lowp_kernels.h),
 * or NULL for other types */
typedef struct {
    void (*decode)(float *out, const void *in, size_t n);
    void (*encode)(void *out, const float *in, size_t n);
    void (*reduce)(const n4p_redspec *rs, void *dst, const void *const *srcs, int nsrc,
                   size_t count);
} n4p_lowp_kernels;
const n4p_lowp_kernels *n4p_lowp_kernels_of(int dtype);
extern const n4p_lowp_kernels n4p_lowp_portable[ncclNumTypes]; /* lowp_portable.c */
extern const n4p_lowp_kernels n4p_lowp_avx2[ncclNumTypes];     /* lowp_avx2.c, x86 */
extern const n4p_lowp_kernels n4p_lowp_avx512[ncclNumTypes];   /* lowp_avx512.c (empty: none) */

/* reduce.c */
void n4p_reduce(const n4p_redspec *rs, void *dst, const void *const *srcs,
                int nsrc, size_t count);
void n4p_add_bias(int dtype, void *dst, const void *bias, size_t count);

/* copy.c (the transport's, declared here for the kernels) */
void n4p_copy(void *dst, const void *src, size_t n, bool stream);

#pragma GCC visibility pop

#endif /* N4P_HOST_INTERNAL_H */
