/*
 * internal.h - shared declarations of the host backend (libnccl4py_host.so).
 *
 * The backend implements the NCCL C ABI on host memory.  Ranks are processes
 * (or threads, for ncclCommInitAll) on one machine that meet in a POSIX
 * shared-memory segment named by the unique id.  See collectives.c for the
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
#include "api_decls.h"

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

#define N4P_SEG_MAGIC 0x6e34706873656735ull /* "n4phseg5" */
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

/* What a rank announces at the start of each collective, so that peers can
 * detect mismatched calls (different collective, count, type, op or root). */
typedef struct {
    uint64_t epoch;
    uint64_t count;
    int32_t kind;
    int32_t dtype;
    int32_t op;   /* builtin op, or -1 for any PreMulSum op */
    int32_t root;
    int32_t direct; /* N4P_DIRECT_*: whether this call tries single copy (cma.c) */
    int32_t pad;
    uint64_t sbuf, rbuf; /* the rank's buffers, for peers' single-copy reads */
    uint64_t chain; /* hash of this and every earlier description of the communicator */
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
    size_t single_copy; /* 0, 1 or N4P_SWITCH_AUTO (cma.c) */
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

/* Measurements of one size class of a tuned collective (tune.c). */
#define N4P_TUNE_PERIOD 256
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
    double tune_start;          /* and when it chose it (tune.c's clock) */
    n4p_reg *regs;              /* guarded by lock */
    n4p_custom_op *ops;         /* guarded by lock */
    pthread_mutex_t lock;
    n4p_settings env;
    n4p_desc desc;     /* of the running (or the last) collective */
    n4p_seg seg;
    n4p_tune_class tune[4][64]; /* per tuned collective and log2 of bytes (tune.c) */
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
    char errmsg[N4P_ERRLEN];
};

/* A window handle: ncclWindow_t is a pointer to this (opaque to callers). */
struct ncclWindow_vidmem {
    n4p_reg reg;
};

/* ------------------------------------------------------ deferred ops -- */

/* The kinds of deferred op, each once, in the order of their values (from 1):
 * FN(id, function, traits) a kind that is a call of the API table's
 * `function` (the name messages give it; rounds.c checks that the table has
 * it), with its traits: N4P_KT_OP (it reduces with an op), N4P_KT_ROOT (it
 * has a root), or 0; OTHER(id) one that is no call of its own. */
enum { N4P_KT_OP = 1, N4P_KT_ROOT = 2 };
#define N4P_HOST_KINDS(FN, OTHER)                                \
    FN(ALLREDUCE, ncclAllReduce, N4P_KT_OP)                      \
    FN(BROADCAST, ncclBroadcast, N4P_KT_ROOT)                    \
    FN(REDUCE, ncclReduce, N4P_KT_OP | N4P_KT_ROOT)              \
    FN(ALLGATHER, ncclAllGather, 0)                              \
    FN(REDUCESCATTER, ncclReduceScatter, N4P_KT_OP)              \
    FN(ALLTOALL, ncclAlltoAll, 0)                                \
    FN(ALLTOALLV, ncclAllToAllv, 0)                              \
    FN(GATHER, ncclGather, N4P_KT_ROOT)                          \
    FN(SCATTER, ncclScatter, N4P_KT_ROOT)                        \
    FN(ALLREDUCE_BIAS, ncclAllReduceWithBias, N4P_KT_OP)         \
    FN(SPLIT, ncclCommSplit, 0)                                  \
    FN(SHRINK, ncclCommShrink, 0)                                \
    FN(GROW, ncclCommGrow, 0)                                    \
    OTHER(INIT_WAIT)                                             \
    FN(SEND, ncclSend, 0)                                        \
    FN(RECV, ncclRecv, 0)

#define N4P_KIND_FN(id, fn, traits) N4P_K_##id,
#define N4P_KIND_OTHER(id) N4P_K_##id,
enum { N4P_K_NONE, N4P_HOST_KINDS(N4P_KIND_FN, N4P_KIND_OTHER) N4P_K_COUNT };
#undef N4P_KIND_FN
#undef N4P_KIND_OTHER

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
float n4p_half_to_float(uint16_t h);
uint16_t n4p_float_to_half(float f);
float n4p_bf16_to_float(uint16_t h);
uint16_t n4p_float_to_bf16(float f);
float n4p_e4m3_to_float(uint8_t v);
uint8_t n4p_float_to_e4m3(float f);
float n4p_e5m2_to_float(uint8_t v);
uint8_t n4p_float_to_e5m2(float f);

/* reduce.c */
void n4p_reduce(const n4p_redspec *rs, void *dst, const void *const *srcs,
                int nsrc, size_t count);
void n4p_add_bias(int dtype, void *dst, const void *bias, size_t count);

/* copy.c */
bool n4p_streaming(ncclComm_t comm, size_t out_bytes);
void n4p_copy(void *dst, const void *src, size_t n, bool stream);
/* whether the CPU's string copy from src to dst is slow (its distance) */
bool n4p_slow_distance(uint64_t dst, uint64_t src);

/* cma.c */
void n4p_cma_probe(ncclComm_t comm);
int n4p_direct_choice(ncclComm_t c, int kind, size_t block_bytes, const void *send,
                      const void *recv, size_t send_bytes, size_t recv_bytes);
ncclResult_t n4p_cma_read(ncclComm_t c, int peer, void *dst, uint64_t src, size_t n,
                          bool stream);
ncclResult_t n4p_cma_write(ncclComm_t c, int peer, uint64_t dst, const void *src, size_t n);
size_t n4p_cma_push_bytes(ncclComm_t c, size_t bytes);
/* whether the ranks outnumber the online CPUs */
bool n4p_crowded(ncclComm_t c);

/* shm.c */
ncclResult_t n4p_random_id(ncclUniqueId *id);
void n4p_derive_id(const unsigned char *secret, uint64_t kind, uint64_t counter,
                   uint64_t extra, ncclUniqueId *out);
bool n4p_id_valid(const ncclUniqueId *id); /* made by this backend (either tag) */
bool n4p_id_is_grow(const ncclUniqueId *id);
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

/* direct.c: the single-copy form of the call when it has one and it
 * applies (*done), else nothing */
ncclResult_t n4p_single_copy(ncclComm_t c, const n4p_op *o, const n4p_redspec *rs,
                             bool *done);

/* tune.c */
bool n4p_tuned(ncclComm_t c, int kind, int choice);
ncclResult_t n4p_tune_pick(ncclComm_t c, const n4p_op *o, size_t bytes, int *path);
/* after a call that succeeded: its time, if it is measured */
void n4p_tune_record(ncclComm_t c);
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
ncclResult_t n4p_check_peer(ncclComm_t comm, int peer, const char *what);
bool n4p_interrupted(void);
/* Group execution: the threads running one group share a cancel flag. */
void n4p_set_cancel_flag(_Atomic int *flag, bool helper);

/* comm_life.c */
ncclResult_t n4p_comm_create(ncclComm_t *out, int nranks, const ncclUniqueId *id,
                             int rank, int device, bool wait, const char *op);
/* wait until every rank has attached, then remove the name and probe */
ncclResult_t n4p_comm_join(ncclComm_t comm);
void n4p_comm_free(ncclComm_t comm);

/* comm.c */
ncclResult_t n4p_check_comm(ncclComm_t comm, bool for_ops);
/* The checks every data call (`name`) starts with: the communicator can run
 * it and `dtype` is a data type, whose element size goes to *esz. */
ncclResult_t n4p_check_call(ncclComm_t comm, const char *name, int dtype, size_t *esz);
/* collectives.c: submit a checked data call (root: the peer of send/recv) */
ncclResult_t n4p_submit_data(int kind, ncclComm_t comm, const void *sendbuff, void *recvbuff,
                             size_t count, int dtype, int op, int root, const void *acc);
/* create now, and join now or (in a group) at the outermost ncclGroupEnd */
ncclResult_t n4p_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                           const char *op);
ncclResult_t n4p_check_config(const ncclConfig_t *config);
ncclResult_t n4p_exec_split(n4p_op *o);
ncclResult_t n4p_exec_shrink(n4p_op *o);
/* grow.c */
ncclResult_t n4p_exec_grow(n4p_op *o);
ncclResult_t n4p_resolve_op(ncclComm_t comm, int op, int dtype, n4p_redspec *rs);

/* rounds.c */
#define N4P_REUSE_SETS 2u          /* the two sets of staging slots alternate */
#define N4P_REUSE_EAGER N4P_DEPTH  /* eager entries and descriptions: a ring */
const char *n4p_kind_name(int kind);
bool n4p_is_reduction(int kind);
bool n4p_is_rooted(int kind);
void *n4p_eager(ncclComm_t c, int k, uint64_t round);
ncclResult_t n4p_round_open(ncclComm_t c, const n4p_op *o, unsigned reuse, int direct);
ncclResult_t n4p_round_close(ncclComm_t c, bool check, int from);

/* collectives.c */
ncclResult_t n4p_exec_coll(n4p_op *o);

/* p2p.c */
ncclResult_t n4p_exec_p2p(ncclComm_t comm, n4p_op *ops, int nops);

/* group.c */
ncclResult_t n4p_submit(const n4p_op *o);
ncclResult_t n4p_group_note(ncclResult_t rc);
bool n4p_in_group(void);

#pragma GCC visibility pop

static inline void *n4p_slot(ncclComm_t c, int set, int k)
{
    size_t s = c->seg.slot_bytes;
    return c->seg.coll + ((size_t)set * (size_t)(c->nranks + 1) + (size_t)k) * s;
}

#endif /* N4P_HOST_INTERNAL_H */
