/*
 * test_host.c - multi-process tests of the host backend.
 *
 *   make -C host test  (or: host/build/test_host [test-name ...])
 *
 * Each test forks 1..4 rank processes that share a unique id created before
 * the fork, runs collectives on them and compares against results computed
 * here with an independent reference (rounding done with libm, values
 * decoded with ldexp).  Every child has an alarm, and the parent kills
 * children that outlive a deadline, so the suite cannot hang.  The alarms
 * only guard against a hang of the test itself (the library's own timeout
 * turns a missing rank into an error in seconds), so they are generous, and
 * longer under the sanitizers, which may run on a busy machine.
 *
 * /dev/shm is shared with other jobs: the leftover checks look only at the
 * segments that this test's processes created (the creator's pid is in the
 * header).
 */
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_api.h"
#include "gen/api_table.h"
#include "internal.h" /* host/: the segment header, to recognise our segments and forge bad ones */

#if defined(__SANITIZE_ADDRESS__)
#define SLOWDOWN 5
#else
#define SLOWDOWN 1
#endif
#define RANK_ALARM (200 * SLOWDOWN) /* seconds for one rank's part of a test */

#define DECL(name) extern __typeof__(*(name##_fn)0) name;
DECL(ncclGetVersion)
DECL(ncclGetUniqueId)
DECL(ncclGetErrorString)
DECL(ncclGetLastError)
DECL(ncclMemAlloc)
DECL(ncclMemFree)
DECL(ncclCommInitRank)
DECL(ncclCommInitRankConfig)
DECL(ncclCommInitAll)
DECL(ncclCommDestroy)
DECL(ncclCommAbort)
DECL(ncclCommRevoke)
DECL(ncclCommFinalize)
DECL(ncclCommSplit)
DECL(ncclCommShrink)
DECL(ncclCommGetUniqueId)
DECL(ncclCommGrow)
DECL(ncclCommGetAsyncError)
DECL(ncclCommCount)
DECL(ncclCommCuDevice)
DECL(ncclCommUserRank)
DECL(ncclCommRegister)
DECL(ncclCommDeregister)
DECL(ncclCommWindowRegister)
DECL(ncclCommWindowDeregister)
DECL(ncclWinGetUserPtr)
DECL(ncclRedOpCreatePreMulSum)
DECL(ncclRedOpDestroy)
DECL(ncclReduce)
DECL(ncclBcast)
DECL(ncclBroadcast)
DECL(ncclAllReduce)
DECL(ncclReduceScatter)
DECL(ncclAllGather)
DECL(ncclAlltoAll)
DECL(ncclGather)
DECL(ncclScatter)
DECL(ncclSend)
DECL(ncclRecv)
DECL(ncclGroupStart)
DECL(ncclGroupEnd)
DECL(ncclGroupSimulateEnd)
DECL(ncclAllReduceWithBias)
DECL(ncclAllToAllv)

static int failures;
static bool comm_consumed; /* the rank function destroyed/aborted it */

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "[pid %d] %s:%d: CHECK(%s) failed: ", getpid(),    \
                    __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

#define OK(call)                                                               \
    do {                                                                       \
        ncclResult_t rc_ = (call);                                             \
        CHECK(rc_ == ncclSuccess, "%s -> %d (%s)", #call, (int)rc_,            \
              ncclGetLastError(NULL));                                         \
    } while (0)

/* ------------------------------------------------- reference numerics -- */

typedef struct {
    int E, M;
    bool fn; /* e4m3fn convention */
} fmt;

static const fmt F16 = {5, 10, false}, BF16 = {8, 7, false},
                 E4M3 = {4, 3, true}, E5M2 = {5, 2, false};

static bool is_lowp(int dt)
{
    return dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat8e4m3 ||
           dt == ncclFloat8e5m2;
}

static fmt fmt_of(int dt)
{
    return dt == ncclFloat16 ? F16 : dt == ncclBfloat16 ? BF16
                                 : dt == ncclFloat8e4m3 ? E4M3
                                                        : E5M2;
}

static double ref_decode(uint32_t code, fmt f)
{
    int B = (1 << (f.E - 1)) - 1;
    uint32_t sign = (code >> (f.E + f.M)) & 1, exp = (code >> f.M) & ((1u << f.E) - 1),
             man = code & ((1u << f.M) - 1);
    double v;
    if (f.fn && exp == (1u << f.E) - 1 && man == (1u << f.M) - 1)
        return NAN;
    if (!f.fn && exp == (1u << f.E) - 1)
        v = man ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp((double)man, 1 - B - f.M);
    else
        v = ldexp((double)(man + (1u << f.M)), (int)exp - B - f.M);
    return sign ? -v : v;
}

static double ref_round(double v, fmt f)
{
    if (isnan(v))
        return NAN;
    int B = (1 << (f.E - 1)) - 1;
    double maxv = f.fn ? ldexp(2.0 - ldexp(1, 1 - f.M), (1 << f.E) - 1 - B)
                       : ldexp(2.0 - ldexp(1, -f.M), (1 << f.E) - 2 - B);
    if (isinf(v))
        return f.fn ? NAN : v;
    if (v == 0)
        return v;
    int e;
    frexp(v, &e);
    int ee = e - 1 < 1 - B ? 1 - B : e - 1;
    double q = ldexp(1.0, ee - f.M);
    double r = nearbyint(v / q) * q;
    if (fabs(r) > maxv)
        return f.fn ? NAN : copysign(INFINITY, v);
    return r;
}

static size_t esize(int dt)
{
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return s[dt];
}

/* Find the code of an exactly representable value (small cache). */
static uint32_t ref_encode(double v, fmt f)
{
    static struct {
        double v;
        int E, M;
        uint32_t code;
    } cache[256];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (cache[i].v == v && cache[i].E == f.E && cache[i].M == f.M)
            return cache[i].code;
    uint32_t bits = 1u + (uint32_t)f.E + (uint32_t)f.M;
    for (uint32_t c = 0; c < (1u << bits); c++) {
        if (ref_decode(c, f) == v && !(v == 0 && (c >> (bits - 1)))) {
            if (ncache < 256)
                cache[ncache].v = v, cache[ncache].E = f.E, cache[ncache].M = f.M,
                cache[ncache++].code = c;
            return c;
        }
    }
    fprintf(stderr, "value %g not representable\n", v);
    abort();
}

static bool is_signed_int(int dt)
{
    return dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64;
}

static bool is_int(int dt)
{
    return dt <= ncclUint64;
}

/* Store a small integer-valued (or half-integer) number. */
static void put(int dt, void *buf, size_t i, double v)
{
    char *p = (char *)buf + i * esize(dt);
    if (is_int(dt)) {
        int64_t iv = (int64_t)v;
        uint64_t u = (uint64_t)iv;
        memcpy(p, &u, esize(dt)); /* little endian truncation */
    } else if (dt == ncclFloat32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (dt == ncclFloat64) {
        memcpy(p, &v, 8);
    } else {
        uint32_t c = ref_encode(v, fmt_of(dt));
        memcpy(p, &c, esize(dt));
    }
}

static uint64_t get_bits(int dt, const void *buf, size_t i)
{
    uint64_t u = 0;
    memcpy(&u, (const char *)buf + i * esize(dt), esize(dt));
    return u;
}

static int64_t sext(uint64_t u, int dt)
{
    int w = (int)esize(dt) * 8;
    if (w == 64)
        return (int64_t)u;
    u &= (1ull << w) - 1;
    if (is_signed_int(dt) && (u >> (w - 1)))
        return (int64_t)(u | ~((1ull << w) - 1));
    return (int64_t)u;
}

static double get_float(int dt, const void *buf, size_t i)
{
    uint64_t u = get_bits(dt, buf, i);
    if (dt == ncclFloat32) {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        return f;
    }
    if (dt == ncclFloat64) {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    return ref_decode((uint32_t)u, fmt_of(dt));
}

static double gen(int dt, int rank, size_t i, int seed)
{
    long k = (long)((i * 7 + (size_t)rank * 3 + (size_t)seed) % 11);
    if (dt == ncclUint8 || dt == ncclUint32 || dt == ncclUint64)
        return (double)k;
    if (is_int(dt))
        return (double)(k - 3);
    return (double)(k - 3) * 0.5;
}

enum { OP_PREMUL_HOST = 100, OP_PREMUL_DEV = 101 };

static double scalar_value(int dt)
{
    return is_int(dt) ? 3.0 : 2.0;
}

/* Reference reduction of element i over n ranks; returns the expected bits
 * (integers) via *bits, or the expected value via *val (floats). */
static void ref_reduce(int dt, int op, int n, size_t i, int seed, uint64_t *bits,
                       double *val)
{
    int w = (int)esize(dt) * 8;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    bool premul = op >= OP_PREMUL_HOST;
    if (is_int(dt)) {
        uint64_t s = (uint64_t)(int64_t)scalar_value(dt);
        uint64_t acc = 0;
        for (int k = 0; k < n; k++) {
            uint64_t x = (uint64_t)(int64_t)gen(dt, k, i, seed);
            if (premul)
                x *= s;
            x &= mask;
            if (k == 0) {
                acc = x;
                continue;
            }
            switch (op) {
            case ncclProd:
                acc = (acc * x) & mask;
                break;
            case ncclMax:
                acc = (is_signed_int(dt) ? sext(x, dt) > sext(acc, dt) : x > acc) ? x : acc;
                break;
            case ncclMin:
                acc = (is_signed_int(dt) ? sext(x, dt) < sext(acc, dt) : x < acc) ? x : acc;
                break;
            default:
                acc = (acc + x) & mask;
            }
        }
        if (op == ncclAvg) {
            if (is_signed_int(dt))
                acc = (uint64_t)(sext(acc, dt) / n);
            else
                acc = acc / (uint64_t)n;
        }
        *bits = acc & mask;
        return;
    }
    /* the floating reference, computed in T */
#define REF_FOLD(T, result)                                  \
    do {                                                     \
        T acc = 0, s = (T)scalar_value(dt);                  \
        for (int k = 0; k < n; k++) {                        \
            T x = (T)gen(dt, k, i, seed);                    \
            if (premul)                                      \
                x *= s;                                      \
            if (k == 0)                                      \
                acc = x;                                     \
            else if (op == ncclProd)                         \
                acc *= x;                                    \
            else if (op == ncclMax)                          \
                acc = x > acc ? x : acc;                     \
            else if (op == ncclMin)                          \
                acc = x < acc ? x : acc;                     \
            else                                             \
                acc += x;                                    \
        }                                                    \
        if (op == ncclAvg)                                   \
            acc /= (T)n;                                     \
        (result) = acc;                                      \
    } while (0)
    if (dt == ncclFloat64) {
        REF_FOLD(double, *val);
        return;
    }
    float r;
    REF_FOLD(float, r);
#undef REF_FOLD
    *val = is_lowp(dt) ? ref_round(r, fmt_of(dt)) : (double)r;
}

static bool same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Compare element i of buf with the reference; report the first few. */
static int check_elem(int dt, int op, int n, const void *buf, size_t i, int seed,
                      const char *what)
{
    uint64_t eb = 0;
    double ev = 0;
    ref_reduce(dt, op, n, i, seed, &eb, &ev);
    if (is_int(dt)) {
        uint64_t got = get_bits(dt, buf, i);
        if (got != eb) {
            CHECK(got == eb, "%s dt=%d op=%d n=%d i=%zu: got %llu want %llu", what,
                  dt, op, n, i, (unsigned long long)got, (unsigned long long)eb);
            return 1;
        }
        return 0;
    }
    double got = get_float(dt, buf, i);
    if (!same(got, ev)) {
        CHECK(same(got, ev), "%s dt=%d op=%d n=%d i=%zu: got %.9g want %.9g", what,
              dt, op, n, i, got, ev);
        return 1;
    }
    return 0;
}

/* --------------------------------------------------------- process farm -- */

typedef void (*rank_fn)(ncclComm_t comm, int rank, int n, void *arg);

/* Processes this test started (ranks create segments, splits included). */
static pid_t our_pids[4096];
static int n_our_pids;

static bool ours(pid_t pid)
{
    if (pid == getpid())
        return true;
    for (int i = 0; i < n_our_pids; i++)
        if (our_pids[i] == pid)
            return true;
    return false;
}

static void remember_pid(pid_t pid)
{
    if (n_our_pids < (int)(sizeof our_pids / sizeof our_pids[0]))
        our_pids[n_our_pids++] = pid;
}

/* The pid that created the segment /dev/shm/<name>, or 0. */
static pid_t segment_creator(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n4p_seg_hdr h;
    ssize_t got = pread(fd, &h, sizeof h, 0);
    close(fd);
    uint64_t magic;
    memcpy(&magic, &h, sizeof magic);
    return got == (ssize_t)sizeof h && magic == N4P_SEG_MAGIC ? (pid_t)h.creator_pid : 0;
}

static void shm_leftovers(const char *when)
{
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "nccl4py-", 8) != 0)
            continue;
        pid_t creator = segment_creator(e->d_name);
        CHECK(creator == 0 || !ours(creator), "%s: /dev/shm/%s (made by pid %d) left behind",
              when, e->d_name, (int)creator);
    }
    closedir(d);
}

/* Fork n ranks; each inits a communicator (unless `noinit`) and runs fn. */
static void run_ranks(const char *name, int n, rank_fn fn, void *arg, bool noinit)
{
    ncclUniqueId id;
    OK(ncclGetUniqueId(&id));
    pid_t pids[16];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(RANK_ALARM);
            failures = 0;
            ncclComm_t comm = NULL;
            if (!noinit) {
                ncclResult_t rc = ncclCommInitRank(&comm, n, id, r);
                CHECK(rc == ncclSuccess, "init rank %d/%d: %s", r, n,
                      ncclGetLastError(NULL));
                if (rc != ncclSuccess)
                    _exit(1);
                int cnt = -1, ur = -1;
                OK(ncclCommCount(comm, &cnt));
                OK(ncclCommUserRank(comm, &ur));
                CHECK(cnt == n && ur == r, "count %d rank %d", cnt, ur);
            }
            fn(comm, r, n, arg);
            if (comm != NULL && !comm_consumed)
                OK(ncclCommDestroy(comm));
            fflush(stderr);
            _exit(failures ? 1 : 0);
        }
        pids[r] = pid;
        remember_pid(pid);
    }
    double deadline = (double)time(NULL) + RANK_ALARM + 30;
    int left = n;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            left--;
            int r = 0;
            while (r < n && pids[r] != p)
                r++;
            bool killed_on_purpose = arg != NULL && *(int *)arg == -99 &&
                                     WIFSIGNALED(status) &&
                                     WTERMSIG(status) == SIGKILL;
            if (!killed_on_purpose)
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "%s: rank %d of %d failed (status 0x%x)", name, r, n, status);
            continue;
        }
        if ((double)time(NULL) > deadline) {
            CHECK(0, "%s: ranks hung; killing them", name);
            for (int r = 0; r < n; r++)
                kill(pids[r], SIGKILL);
            deadline += 1e9;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    shm_leftovers(name);
}

/* ------------------------------------------------------------- tests -- */

static const int all_dtypes[] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) value,
#include "dtypes.def"
};
#define NDT (int)(sizeof all_dtypes / sizeof all_dtypes[0])

static void fill(int dt, void *buf, int rank, size_t count, int seed)
{
    for (size_t i = 0; i < count; i++)
        put(dt, buf, i, gen(dt, rank, i, seed));
}

static int make_op(ncclComm_t comm, int dt, int op, void *dev_scalar)
{
    if (op < OP_PREMUL_HOST)
        return op;
    unsigned char s[8];
    put(dt, s, 0, scalar_value(dt));
    ncclRedOp_t out = ncclSum;
    if (op == OP_PREMUL_HOST) {
        OK(ncclRedOpCreatePreMulSum(&out, s, dt, ncclScalarHostImmediate, comm));
        memset(s, 0, sizeof s); /* must have been copied */
    } else {
        memcpy(dev_scalar, s, 8);
        OK(ncclRedOpCreatePreMulSum(&out, dev_scalar, dt, ncclScalarDevice, comm));
    }
    CHECK((int)out >= ncclNumOps, "custom op id %d", (int)out);
    return out;
}

static void t_allreduce(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    static const size_t counts[] = {1, 37, 5000, 40000};
    static const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg,
                              OP_PREMUL_HOST, OP_PREMUL_DEV};
    unsigned char dev_scalar[8];
    for (int d = 0; d < NDT; d++) {
        int dt = all_dtypes[d];
        for (size_t ci = 0; ci < 4; ci++) {
            size_t count = counts[ci];
            char *send = malloc(count * esize(dt) + 1);
            char *recv = malloc(count * esize(dt) + 1);
            for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
                if (ci == 3 && oi > 0 && dt != ncclFloat32)
                    continue; /* keep the big case short */
                int op = make_op(comm, dt, ops[oi], dev_scalar);
                for (int inplace = 0; inplace < 2; inplace++) {
                    int seed = (int)(oi * 3 + ci);
                    /* odd offset: buffers need not be aligned */
                    char *s = send + (ci == 1), *r = inplace ? s : recv + (ci == 1);
                    fill(dt, s, rank, count, seed);
                    ncclResult_t rc = ncclAllReduce(s, r, count, dt, op, comm, NULL);
                    CHECK(rc == ncclSuccess, "allreduce dt=%d op=%d: %s", dt, op,
                          ncclGetLastError(comm));
                    int bad = 0;
                    for (size_t i = 0; i < count && bad < 3; i++)
                        bad += check_elem(dt, ops[oi], n, r, i, seed, "allreduce");
                }
                if (op >= ncclNumOps)
                    OK(ncclRedOpDestroy(op, comm));
            }
            free(send);
            free(recv);
        }
    }
}

static void t_rooted_and_gathers(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    static const int dts[] = {ncclInt32, ncclFloat32, ncclFloat16, ncclFloat8e4m3,
                              ncclFloat64};
    static const size_t counts[] = {1, 1000, 70001};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        int dt = dts[di];
        size_t es = esize(dt);
        for (size_t ci = 0; ci < 3; ci++) {
            size_t c = counts[ci];
            char *a = malloc(c * es * (size_t)n);
            char *b = malloc(c * es * (size_t)n);
            char *acc = malloc(c * es);
            for (int root = 0; root < n; root++) {
                int seed = root + (int)ci;
                /* broadcast, out of place and in place (ncclBcast) */
                fill(dt, a, root, c, seed);
                if (rank != root)
                    memset(a, 0x5a, c * es);
                memset(b, 0, c * es);
                OK(ncclBroadcast(a, b, c, dt, root, comm, NULL));
                for (size_t i = 0; i < c; i++)
                    if (get_bits(dt, b, i) != (put(dt, acc, 0, gen(dt, root, i, seed)), get_bits(dt, acc, 0))) {
                        CHECK(0, "broadcast dt=%d root=%d i=%zu", dt, root, i);
                        break;
                    }
                OK(ncclBcast(a, c, dt, root, comm, NULL));
                for (size_t i = 0; i < c; i++)
                    if (get_bits(dt, a, i) != get_bits(dt, b, i)) {
                        CHECK(0, "bcast dt=%d root=%d i=%zu", dt, root, i);
                        break;
                    }
                /* reduce, out of place and in place */
                for (int inplace = 0; inplace < 2; inplace++) {
                    fill(dt, a, rank, c, seed);
                    char *r = inplace ? a : b;
                    OK(ncclReduce(a, rank == root ? r : NULL, c, dt, ncclSum, root, comm,
                                  NULL));
                    if (rank == root)
                        for (size_t i = 0, bad = 0; i < c && bad < 3; i++)
                            bad += (size_t)check_elem(dt, ncclSum, n, r, i, seed, "reduce");
                }
                /* gather: out of place, and in place at the root */
                for (int inplace = 0; inplace < 2; inplace++) {
                    char *send = inplace && rank == root ? b + (size_t)rank * c * es : a;
                    fill(dt, send, rank, c, seed);
                    OK(ncclGather(send, rank == root ? b : NULL, c, dt, root, comm, NULL));
                    if (rank == root)
                        for (int k = 0; k < n; k++)
                            for (size_t i = 0; i < c; i++) {
                                put(dt, acc, 0, gen(dt, k, i, seed));
                                if (get_bits(dt, b + (size_t)k * c * es, i) != get_bits(dt, acc, 0)) {
                                    CHECK(0, "gather dt=%d root=%d k=%d i=%zu", dt, root, k, i);
                                    k = n;
                                    break;
                                }
                            }
                }
                /* scatter: root sends n*c; in place at the root too */
                for (int inplace = 0; inplace < 2; inplace++) {
                    if (rank == root)
                        for (int k = 0; k < n; k++)
                            fill(dt, a + (size_t)k * c * es, k, c, seed + 1);
                    char *recv = inplace && rank == root ? a + (size_t)rank * c * es : b;
                    OK(ncclScatter(rank == root ? a : NULL, recv, c, dt, root, comm, NULL));
                    for (size_t i = 0; i < c; i++) {
                        put(dt, acc, 0, gen(dt, rank, i, seed + 1));
                        if (get_bits(dt, recv, i) != get_bits(dt, acc, 0)) {
                            CHECK(0, "scatter dt=%d root=%d i=%zu inplace=%d", dt, root, i, inplace);
                            break;
                        }
                    }
                }
            }
            /* allgather out of place and in place */
            for (int inplace = 0; inplace < 2; inplace++) {
                char *send = inplace ? b + (size_t)rank * c * es : a;
                fill(dt, send, rank, c, 5);
                OK(ncclAllGather(send, b, c, dt, comm, NULL));
                for (int k = 0; k < n; k++)
                    for (size_t i = 0; i < c; i++) {
                        put(dt, acc, 0, gen(dt, k, i, 5));
                        if (get_bits(dt, b + (size_t)k * c * es, i) != get_bits(dt, acc, 0)) {
                            CHECK(0, "allgather dt=%d k=%d i=%zu", dt, k, i);
                            k = n;
                            break;
                        }
                    }
            }
            /* reduce-scatter: block k of every rank's input reduced on rank k */
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int k = 0; k < n; k++)
                    for (size_t i = 0; i < c; i++)
                        put(dt, a + (size_t)k * c * es, i, gen(dt, rank, (size_t)k * c + i, 6));
                char *recv = inplace ? a + (size_t)rank * c * es : b;
                OK(ncclReduceScatter(a, recv, c, dt, ncclMax, comm, NULL));
                for (size_t i = 0; i < c; i++) {
                    uint64_t eb;
                    double ev;
                    ref_reduce(dt, ncclMax, n, (size_t)rank * c + i, 6, &eb, &ev);
                    bool okv = is_int(dt) ? get_bits(dt, recv, i) == eb
                                          : same(get_float(dt, recv, i), ev);
                    if (!okv) {
                        CHECK(0, "reducescatter dt=%d i=%zu inplace=%d", dt, i, inplace);
                        break;
                    }
                }
            }
            /* all-to-all, out of place and in place */
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int d = 0; d < n; d++)
                    for (size_t i = 0; i < c; i++)
                        put(dt, a + (size_t)d * c * es, i, gen(dt, rank * 5 + d, i, 7));
                char *recv = inplace ? a : b;
                OK(ncclAlltoAll(a, recv, c, dt, comm, NULL));
                for (int s = 0; s < n; s++)
                    for (size_t i = 0; i < c; i++) {
                        put(dt, acc, 0, gen(dt, s * 5 + rank, i, 7));
                        if (get_bits(dt, recv + (size_t)s * c * es, i) != get_bits(dt, acc, 0)) {
                            CHECK(0, "alltoall dt=%d s=%d i=%zu", dt, s, i);
                            s = n;
                            break;
                        }
                    }
            }
            /* allreduce with bias */
            fill(dt, a, rank, c, 8);
            fill(dt, acc, 77, c, 9);
            OK(ncclAllReduceWithBias(a, b, c, dt, ncclSum, comm, NULL, acc));
            for (size_t i = 0; i < c; i++) {
                uint64_t eb;
                double ev;
                ref_reduce(dt, ncclSum, n, i, 8, &eb, &ev);
                double bias = gen(dt, 77, i, 9);
                bool okv;
                if (is_int(dt)) {
                    uint64_t want = eb + (uint64_t)(int64_t)bias;
                    okv = ((get_bits(dt, b, i) ^ want) << (64 - 8 * es)) == 0;
                } else {
                    float sum = (float)ev + (float)bias;
                    double want = is_lowp(dt) ? ref_round(sum, fmt_of(dt))
                                  : dt == ncclFloat64 ? ev + bias : (double)sum;
                    okv = same(get_float(dt, b, i), want);
                }
                if (!okv) {
                    CHECK(0, "allreduce_with_bias dt=%d i=%zu", dt, i);
                    break;
                }
            }
            free(a);
            free(b);
            free(acc);
        }
    }
    /* all-to-all-v: rank s sends (s + d + 1) % 3 * 500 + 1 elements to d */
    {
        size_t sc[8], sd[8], rcn[8], rd[8], so = 0, ro = 0;
        for (int d = 0; d < n; d++) {
            sc[d] = (size_t)((rank + d + 1) % 3) * 500 + 1;
            sd[d] = so + 3; /* gaps between blocks */
            so += sc[d] + 3;
            rcn[d] = (size_t)((d + rank + 1) % 3) * 500 + 1;
            rd[d] = ro;
            ro += rcn[d] + 1;
        }
        int32_t *sb = calloc(so, 4), *rb = calloc(ro, 4);
        for (int d = 0; d < n; d++)
            for (size_t i = 0; i < sc[d]; i++)
                sb[sd[d] + i] = rank * 100000 + d * 10000 + (int)i;
        OK(ncclAllToAllv(sb, sc, sd, rb, rcn, rd, ncclInt32, comm, NULL));
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < rcn[s]; i++)
                if (rb[rd[s] + i] != s * 100000 + rank * 10000 + (int)i) {
                    CHECK(0, "alltoallv s=%d i=%zu got %d", s, i, rb[rd[s] + i]);
                    break;
                }
        free(sb);
        free(rb);
    }
    /* zero counts complete without synchronising */
    OK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, NULL));
    OK(ncclAllGather(NULL, NULL, 0, ncclFloat32, comm, NULL));
}

static void t_p2p(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    const size_t big = 300001; /* far larger than the 4 KiB test rings */
    int32_t *s1 = malloc(big * 4), *r1 = malloc(big * 4);
    int32_t s2[5], r2[5], self_r[3], self_s[3] = {rank, rank + 1, rank + 2};
    for (size_t i = 0; i < big; i++)
        s1[i] = (int32_t)(rank * 1000003 + (int)i);
    for (int i = 0; i < 5; i++)
        s2[i] = rank * 10 + i;
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    /* ring: everybody sends first, then receives, all in one group; two
     * messages per pair to check FIFO matching; plus a self-send */
    OK(ncclGroupStart());
    OK(ncclSend(s1, big, ncclInt32, next, comm, NULL));
    OK(ncclSend(s2, 5, ncclInt32, next, comm, NULL));
    OK(ncclSend(self_s, 3, ncclInt32, rank, comm, NULL));
    OK(ncclRecv(r1, big, ncclInt32, prev, comm, NULL));
    OK(ncclRecv(r2, 5, ncclInt32, prev, comm, NULL));
    OK(ncclRecv(self_r, 3, ncclInt32, rank, comm, NULL));
    OK(ncclGroupEnd());
    for (size_t i = 0; i < big; i++)
        if (r1[i] != (int32_t)(prev * 1000003 + (int)i)) {
            CHECK(0, "ring big i=%zu got %d", i, r1[i]);
            break;
        }
    for (int i = 0; i < 5; i++)
        CHECK(r2[i] == prev * 10 + i, "ring small %d", i);
    for (int i = 0; i < 3; i++)
        CHECK(self_r[i] == rank + i, "self %d", i);
    /* outside a group a small send does not wait for the receiver */
    if (n > 1) {
        if (rank == 0) {
            OK(ncclSend(s2, 5, ncclInt32, 1, comm, NULL));
            OK(ncclRecv(r2, 5, ncclInt32, 1, comm, NULL));
            CHECK(r2[0] == 10, "pingpong");
        } else if (rank == 1) {
            OK(ncclSend(s2, 5, ncclInt32, 0, comm, NULL));
            OK(ncclRecv(r2, 5, ncclInt32, 0, comm, NULL));
            CHECK(r2[0] == 0, "pingpong");
        }
    }
    /* all-to-all through send/recv in a group, mixed with a collective */
    int32_t out[8], in[8], v = rank + 1, sum = 0;
    OK(ncclGroupStart());
    for (int p = 0; p < n; p++) {
        out[p] = rank * 100 + p;
        OK(ncclSend(&out[p], 1, ncclInt32, p, comm, NULL));
        OK(ncclRecv(&in[p], 1, ncclInt32, p, comm, NULL));
    }
    OK(ncclAllReduce(&v, &sum, 1, ncclInt32, ncclSum, comm, NULL));
    OK(ncclGroupEnd());
    for (int p = 0; p < n; p++)
        CHECK(in[p] == p * 100 + rank, "a2a p2p from %d: %d", p, in[p]);
    CHECK(sum == n * (n + 1) / 2, "sum in group %d", sum);
    /* in place: each rank sends its buffer on and receives into it what
     * the previous one held; then a self-send into its own source shifted
     * by more than the ring (memmove) */
    for (size_t i = 0; i < big; i++)
        s1[i] = (int32_t)(rank * 1000003 + (int)i);
    OK(ncclGroupStart());
    OK(ncclSend(s1, big, ncclInt32, next, comm, NULL));
    OK(ncclRecv(s1, big, ncclInt32, prev, comm, NULL));
    OK(ncclGroupEnd());
    for (size_t i = 0; i < big; i++)
        if (s1[i] != (int32_t)(prev * 1000003 + (int)i)) {
            CHECK(0, "in-place ring i=%zu got %d", i, s1[i]);
            break;
        }
    const size_t shift = 5000; /* elements: 20000 bytes */
    for (size_t i = 0; i < big; i++)
        s1[i] = (int32_t)i;
    OK(ncclGroupStart());
    OK(ncclRecv(s1 + shift, big - shift, ncclInt32, rank, comm, NULL));
    OK(ncclSend(s1, big - shift, ncclInt32, rank, comm, NULL));
    OK(ncclGroupEnd());
    for (size_t i = 0; i < big; i++)
        if (s1[i] != (int32_t)(i < shift ? i : i - shift)) {
            CHECK(0, "self-send shifted i=%zu got %d", i, s1[i]);
            break;
        }
    free(s1);
    free(r1);
}

static void t_split(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    /* even / odd, the last rank opts out; key reverses the order */
    int color = rank == n - 1 && n > 2 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub = (ncclComm_t)1;
    OK(ncclCommSplit(comm, color, -rank, &sub, NULL));
    if (color == NCCL_SPLIT_NOCOLOR) {
        CHECK(sub == NULL, "NOCOLOR gives NULL");
    } else {
        int members = 0, before = 0;
        for (int r = 0; r < n; r++)
            if (!(r == n - 1 && n > 2) && r % 2 == color) {
                members++;
                if (r > rank)
                    before++;
            }
        int cnt = -1, ur = -1;
        OK(ncclCommCount(sub, &cnt));
        OK(ncclCommUserRank(sub, &ur));
        CHECK(cnt == members && ur == before, "split count %d/%d rank %d/%d", cnt,
              members, ur, before);
        int v = rank, s = -1;
        OK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclSum, sub, NULL));
        int want = 0;
        for (int r = 0; r < n; r++)
            if (!(r == n - 1 && n > 2) && r % 2 == color)
                want += r;
        CHECK(s == want, "split allreduce %d want %d", s, want);
        OK(ncclCommDestroy(sub));
    }
    /* the parent still works */
    int v = 1, s = 0;
    OK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclSum, comm, NULL));
    CHECK(s == n, "parent after split");
    /* shrink: the last rank leaves and does not take part */
    if (n >= 2) {
        if (rank != n - 1) {
            int ex = n - 1;
            ncclComm_t small = NULL;
            OK(ncclCommShrink(comm, &ex, 1, &small, NULL, 0));
            int cnt = -1;
            OK(ncclCommCount(small, &cnt));
            CHECK(cnt == n - 1, "shrink count %d", cnt);
            OK(ncclAllReduce(&v, &s, 1, ncclInt32, ncclSum, small, NULL));
            CHECK(s == n - 1, "shrink allreduce %d", s);
            OK(ncclCommDestroy(small));
        }
    }
}

static void t_kill(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    (void)n;
    float x = 1, y = 0;
    OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
    if (rank == 2)
        raise(SIGKILL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t rc = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(rc == ncclRemoteError, "survivor got %d (%s)", (int)rc, ncclGetLastError(comm));
    CHECK(dt < 2.5, "detection took %.2f s", dt);
    CHECK(strstr(ncclGetLastError(comm), "rank") != NULL, "message: %s",
          ncclGetLastError(comm));
    ncclResult_t ae = ncclSuccess;
    OK(ncclCommGetAsyncError(comm, &ae));
    CHECK(ae != ncclSuccess, "async error after failure");
    rc = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL);
    CHECK(rc != ncclSuccess, "failed comm refuses work");
    OK(ncclCommAbort(comm));
    comm_consumed = true;
}

static void t_missing_rank(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)comm;
    (void)arg;
    ncclUniqueId *id = (ncclUniqueId *)((int *)arg + 2);
    if (rank == n - 1)
        return; /* never arrives */
    ncclComm_t c = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ncclResult_t rc = ncclCommInitRank(&c, n, *id, rank);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(rc == ncclTimeout, "init with a missing rank -> %d", (int)rc);
    CHECK(dt > 0.9 && dt < 5, "timeout after %.2f s", dt);
    CHECK(strstr(ncclGetLastError(NULL), "missing") != NULL, "message: %s",
          ncclGetLastError(NULL));
}

/* A shrink outside a group that fails (a rank that never takes part: the
 * new communicator times out) returns the error and leaves the parent
 * usable; its exclude list is freed once. */
static void t_shrink_timeout(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    (void)n;
    if (rank == 0) {
        setenv("NCCL4PY_HOST_TIMEOUT", "1", 1); /* for the new communicator only */
        ncclComm_t child = NULL;
        ncclResult_t rc = ncclCommShrink(comm, NULL, 0, &child, NULL, 0);
        CHECK(rc == ncclTimeout && child == NULL, "shrink without rank 1 -> %d", (int)rc);
    }
    float x = 1, y = 0; /* both ranks again, after rank 0's timeout */
    OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
    CHECK(y == 2, "all-reduce after a failed shrink: %g", (double)y);
}

static void t_mismatch(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    (void)n;
    float x[16] = {0}, y[16];
    ncclResult_t rc = ncclAllReduce(x, y, 10 + (size_t)rank, ncclFloat32, ncclSum, comm, NULL);
    CHECK(rc == ncclInvalidUsage, "mismatched counts -> %d", (int)rc);
    CHECK(strstr(ncclGetLastError(comm), "mismatch") != NULL, "message %s",
          ncclGetLastError(comm));
}

/* The root of a broadcast waits for nobody: it learns of a mismatch at its
 * next call, with the error of the rank that found it. */
static void t_mismatch_root(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    (void)n;
    float x[16] = {0}, y[16];
    if (rank == 0) {
        OK(ncclBroadcast(x, y, 4, ncclFloat32, 0, comm, NULL));
        ncclResult_t rc = ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL);
        CHECK(rc == ncclInvalidUsage, "the root's next call -> %d", (int)rc);
        CHECK(strstr(ncclGetLastError(comm), "mismatch") != NULL, "message %s",
              ncclGetLastError(comm));
    } else {
        ncclResult_t rc = ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL);
        CHECK(rc == ncclInvalidUsage, "allreduce against a broadcast -> %d", (int)rc);
        CHECK(strstr(ncclGetLastError(comm), "ncclBroadcast") != NULL, "message %s",
              ncclGetLastError(comm));
    }
}

static void t_args(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    float x = 0, y;
    ncclComm_t bad = NULL;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument, "NULL comm");
    CHECK(strlen(ncclGetLastError(NULL)) > 0, "last error set");
    CHECK(ncclAllReduce(NULL, &y, 1, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidArgument, "NULL send");
    CHECK(ncclAllReduce(&x, &y, 1, (ncclDataType_t)12, ncclSum, comm, NULL) == ncclInvalidArgument, "dtype");
    CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, (ncclRedOp_t)9, comm, NULL) == ncclInvalidArgument, "op");
    CHECK(ncclBroadcast(&x, &y, 1, ncclFloat32, n, comm, NULL) == ncclInvalidArgument, "root");
    CHECK(ncclSend(&x, 1, ncclFloat32, -1, comm, NULL) == ncclInvalidArgument, "peer");
    CHECK(ncclCommInitRank(&bad, 0, id, 0) == ncclInvalidArgument, "nranks 0");
    CHECK(ncclCommInitRank(&bad, 2, id, 2) == ncclInvalidArgument, "rank range");
    CHECK(ncclCommInitRank(&bad, 2, id, 0) == ncclInvalidArgument, "foreign id");
    ncclConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.size = sizeof cfg;
    cfg.magic = 0x1234;
    OK(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRankConfig(&bad, 1, id, 0, &cfg) == ncclInvalidArgument, "magic");
    cfg.magic = NCCL_API_MAGIC;
    cfg.blocking = 0;
    OK(ncclCommInitRankConfig(&bad, 1, id, 0, &cfg)); /* 1 rank: completes */
    OK(ncclCommDestroy(bad));
    CHECK(strcmp(ncclGetErrorString(ncclTimeout), ncclGetErrorString(99)) != 0, "timeout string");
    CHECK(ncclGetErrorString(99) != NULL && ncclGetErrorString(-1) != NULL, "unknown string");
    int ver = 0;
    OK(ncclGetVersion(&ver));
    CHECK(ver == NCCL4PY_ABI_VERSION_CODE, "version %d", ver);
    /* registration bookkeeping */
    void *h1 = NULL, *h2 = NULL, *mem = NULL;
    OK(ncclMemAlloc(&mem, 10000));
    CHECK(((uintptr_t)mem & 4095) == 0, "page aligned");
    OK(ncclCommRegister(comm, mem, 10000, &h1));
    OK(ncclCommRegister(comm, mem, 100, &h2));
    CHECK(h1 && h2 && h1 != h2, "distinct handles");
    OK(ncclCommDeregister(comm, h1));
    CHECK(ncclCommDeregister(comm, h1) == ncclInvalidArgument, "double deregister");
    CHECK(ncclCommDeregister(comm, &x) == ncclInvalidArgument, "unknown handle");
    OK(ncclCommDeregister(comm, h2));
    ncclWindow_t w = NULL;
    void *up = NULL;
    OK(ncclCommWindowRegister(comm, mem, 4096, &w, 0));
    OK(ncclWinGetUserPtr(comm, w, &up));
    CHECK(up == mem, "window user ptr");
    OK(ncclCommWindowDeregister(comm, w));
    CHECK(ncclCommWindowDeregister(comm, w) == ncclInvalidArgument, "window twice");
    OK(ncclMemFree(mem));
    int dev = -1;
    OK(ncclCommCuDevice(comm, &dev));
    CHECK(dev == 0, "device %d", dev);
    /* bad arguments inside a group fail the group */
    OK(ncclGroupStart());
    CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, (ncclRedOp_t)77, comm, NULL) == ncclInvalidArgument, "in group");
    CHECK(ncclGroupEnd() == ncclInvalidArgument, "group end reports");
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "unbalanced group end");
    /* simulate: nothing runs */
    ncclSimInfo_t si = {sizeof si, NCCL_SIM_INFO_MAGIC, 23004, -1.0f};
    y = 42;
    OK(ncclGroupStart());
    OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
    OK(ncclGroupSimulateEnd(&si));
    CHECK(si.estimatedTime >= 0 && y == 42, "simulate %g", (double)si.estimatedTime);
    /* the communicator still works, then revoke stops it */
    x = (float)rank;
    OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclMax, comm, NULL));
    CHECK(y == (float)(n - 1), "after bad calls");
    OK(ncclCommFinalize(comm));
    ncclResult_t ae = ncclInternalError;
    OK(ncclCommGetAsyncError(comm, &ae));
    CHECK(ae == ncclSuccess, "async error %d", (int)ae);
    OK(ncclCommRevoke(comm, 0));
    CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidUsage, "revoked");
}

static void *abort_later(void *arg)
{
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    ncclCommAbort((ncclComm_t)arg);
    return NULL;
}

/* ncclCommAbort from another thread unblocks a waiting collective. */
static void t_abort_thread(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    (void)n;
    if (rank == 1) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        return;
    }
    pthread_t t;
    pthread_create(&t, NULL, abort_later, comm);
    float x = 1, y;
    double t0 = (double)time(NULL);
    ncclResult_t rc = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL);
    CHECK(rc != ncclSuccess, "aborted allreduce returned %d", (int)rc);
    CHECK((double)time(NULL) - t0 < 3, "abort took too long");
    pthread_join(t, NULL);
    comm_consumed = true;
}

/* One process, three ranks (ncclCommInitAll), collectives in a group. */
static void t_init_all(void)
{
    ncclComm_t comms[3];
    OK(ncclCommInitAll(comms, 3, NULL));
    float in[3][1000], out[3][1000];
    for (int r = 0; r < 3; r++) {
        int d = -1;
        OK(ncclCommCuDevice(comms[r], &d));
        CHECK(d == r, "device %d", d);
        for (int i = 0; i < 1000; i++)
            in[r][i] = (float)(r * 1000 + i);
    }
    OK(ncclGroupStart());
    for (int r = 0; r < 3; r++)
        OK(ncclAllReduce(in[r], out[r], 1000, ncclFloat32, ncclSum, comms[r], NULL));
    OK(ncclGroupEnd());
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 1000; i++)
            if (out[r][i] != (float)(3000 + 3 * i)) {
                CHECK(0, "initall rank %d i %d: %g", r, i, (double)out[r][i]);
                break;
            }
    /* split inside a group, then a broadcast on the children */
    ncclComm_t sub[3];
    OK(ncclGroupStart());
    for (int r = 0; r < 3; r++)
        OK(ncclCommSplit(comms[r], r == 1 ? NCCL_SPLIT_NOCOLOR : 0, r, &sub[r], NULL));
    OK(ncclGroupEnd());
    CHECK(sub[1] == NULL && sub[0] && sub[2], "split in group");
    OK(ncclGroupStart());
    OK(ncclBroadcast(in[2], out[0], 1000, ncclFloat32, 1, sub[0], NULL));
    OK(ncclBroadcast(in[2], out[2], 1000, ncclFloat32, 1, sub[2], NULL));
    OK(ncclGroupEnd());
    CHECK(out[0][5] == in[2][5], "bcast in split group");
    OK(ncclCommDestroy(sub[0]));
    OK(ncclCommDestroy(sub[2]));
    for (int r = 0; r < 3; r++)
        OK(ncclCommDestroy(comms[r]));

    /* InitRank for two ranks from one thread inside a group */
    ncclUniqueId id;
    ncclComm_t c[2];
    OK(ncclGetUniqueId(&id));
    OK(ncclGroupStart());
    OK(ncclCommInitRank(&c[0], 2, id, 0));
    OK(ncclCommInitRank(&c[1], 2, id, 1));
    OK(ncclGroupEnd());
    int32_t a[2] = {5, 7}, b[2] = {0, 0};
    OK(ncclGroupStart());
    OK(ncclAllReduce(&a[0], &b[0], 1, ncclInt32, ncclProd, c[0], NULL));
    OK(ncclAllReduce(&a[1], &b[1], 1, ncclInt32, ncclProd, c[1], NULL));
    OK(ncclGroupEnd());
    CHECK(b[0] == 35 && b[1] == 35, "group init %d %d", b[0], b[1]);
    OK(ncclCommDestroy(c[0]));
    OK(ncclCommDestroy(c[1]));
    shm_leftovers("init_all");
}

/* A group of two communicators whose shrink fails while it creates the new
 * communicator (rank 1 does not take part: a timeout): ncclGroupEnd's error
 * text is that failure's. */
static void t_group_child_error(void)
{
    ncclComm_t comms[2], sub[2] = {NULL, NULL};
    OK(ncclCommInitAll(comms, 2, NULL));
    int one = 0;
    setenv("NCCL4PY_HOST_TIMEOUT", "1", 1); /* for the new communicators */
    OK(ncclGroupStart());
    OK(ncclCommShrink(comms[0], NULL, 0, &sub[0], NULL, 0));
    OK(ncclCommShrink(comms[1], &one, 1, &sub[1], NULL, 0));
    ncclResult_t rc = ncclGroupEnd();
    setenv("NCCL4PY_HOST_TIMEOUT", "20", 1);
    CHECK(rc == ncclTimeout, "group with a shrink that times out -> %d", (int)rc);
    CHECK(strstr(ncclGetLastError(NULL), "timed out") != NULL &&
              strstr(ncclGetLastError(NULL), "ncclCommShrink") != NULL,
          "message: %s", ncclGetLastError(NULL));
    if (sub[1] != NULL)
        OK(ncclCommDestroy(sub[1]));
    OK(ncclCommDestroy(comms[0]));
    OK(ncclCommDestroy(comms[1]));
    shm_leftovers("group_child_error");
}

/* Grow 2 ranks to 4 from one thread, in a group (as ncclCommInitAll's ranks
 * are driven), with the argument checks, a used id, a missing id and a new
 * rank that never arrives. */
static int grown_sum(ncclComm_t *c, int n, int32_t *out)
{
    int32_t in[8];
    ncclResult_t rc = ncclGroupStart();
    for (int r = 0; r < n && rc == ncclSuccess; r++) {
        in[r] = 1 << r;
        rc = ncclAllReduce(&in[r], &out[r], 1, ncclInt32, ncclSum, c[r], NULL);
    }
    ncclResult_t end = ncclGroupEnd();
    return rc != ncclSuccess ? (int)rc : (int)end;
}

static void t_grow(void)
{
    ncclComm_t old[2], big[4], bad = NULL;
    ncclUniqueId id, plain, again;
    OK(ncclCommInitAll(old, 2, NULL));
    OK(ncclGetUniqueId(&plain));
    OK(ncclCommGetUniqueId(old[0], &id));
    CHECK(ncclCommGetUniqueId(old[0], &again) == ncclInvalidUsage, "a second id before the grow");
    CHECK(ncclCommInitRank(&bad, 4, id, 2) == ncclInvalidArgument && bad == NULL,
          "init with a grow id");
    struct {
        ncclComm_t comm;
        int n;
        const ncclUniqueId *id;
        int rank;
        const char *what;
    } refused[] = {
        {NULL, 4, &id, 1, "a new rank below the old size"},
        {NULL, 4, &id, 4, "a new rank at nRanks"},
        {NULL, 2, &id, 2, "nRanks not larger"},
        {NULL, 4, NULL, 2, "a new rank without an id"},
        {NULL, 4, &plain, 2, "a new rank with an ncclGetUniqueId id"},
        {old[0], 4, &id, 0, "an existing rank with a rank"},
        {old[0], 2, &id, -1, "an existing rank, nRanks not larger"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ncclResult_t rc = ncclCommGrow(refused[i].comm, refused[i].n, refused[i].id,
                                       refused[i].rank, &bad, NULL);
        CHECK(rc == ncclInvalidArgument && bad == NULL, "%s -> %d", refused[i].what, (int)rc);
    }
    OK(ncclGroupStart());
    OK(ncclCommGrow(old[0], 4, &id, -1, &big[0], NULL));
    OK(ncclCommGrow(old[1], 4, NULL, -1, &big[1], NULL));
    OK(ncclCommGrow(NULL, 4, &id, 2, &big[2], NULL));
    OK(ncclCommGrow(NULL, 4, &id, 3, &big[3], NULL));
    OK(ncclGroupEnd());
    int32_t sum[4] = {0};
    CHECK(grown_sum(big, 4, sum) == ncclSuccess, "all-reduce on the grown comm");
    for (int r = 0; r < 4; r++) {
        int cnt = -1, ur = -1;
        OK(ncclCommCount(big[r], &cnt));
        OK(ncclCommUserRank(big[r], &ur));
        CHECK(cnt == 4 && ur == r && sum[r] == 15, "grown rank %d: %d of %d, sum %d", r, ur, cnt,
              (int)sum[r]);
    }
    CHECK(grown_sum(old, 2, sum) == ncclSuccess && sum[0] == 3, "the parent still works");
    for (int r = 0; r < 4; r++)
        OK(ncclCommDestroy(big[r]));
    /* the id is used up */
    OK(ncclGroupStart());
    OK(ncclCommGrow(old[0], 3, &id, -1, &big[0], NULL));
    OK(ncclCommGrow(old[1], 3, NULL, -1, &big[1], NULL));
    CHECK(ncclGroupEnd() == ncclInvalidArgument, "a used id: %s", ncclGetLastError(NULL));
    /* nobody made an id */
    OK(ncclGroupStart());
    OK(ncclCommGrow(old[0], 3, NULL, -1, &big[0], NULL));
    OK(ncclCommGrow(old[1], 3, NULL, -1, &big[1], NULL));
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "no id made: %s", ncclGetLastError(NULL));
    /* the coordinator kept its id to itself */
    OK(ncclCommGetUniqueId(old[1], &id));
    OK(ncclGroupStart());
    OK(ncclCommGrow(old[0], 3, NULL, -1, &big[0], NULL));
    OK(ncclCommGrow(old[1], 3, NULL, -1, &big[1], NULL));
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "coordinator without id: %s",
          ncclGetLastError(NULL));
    /* that id is still good; a new rank that never arrives is a timeout */
    setenv("NCCL4PY_HOST_TIMEOUT", "1", 1);
    OK(ncclGroupStart());
    OK(ncclCommGrow(old[0], 4, &id, -1, &big[0], NULL));
    OK(ncclCommGrow(old[1], 4, &id, -1, &big[1], NULL));
    OK(ncclCommGrow(NULL, 4, &id, 2, &big[2], NULL));
    ncclResult_t rc = ncclGroupEnd();
    setenv("NCCL4PY_HOST_TIMEOUT", "20", 1);
    CHECK(rc == ncclTimeout, "a missing new rank -> %d", (int)rc);
    CHECK(strstr(ncclGetLastError(NULL), "ncclCommGrow") != NULL &&
              strstr(ncclGetLastError(NULL), "missing: rank 3") != NULL,
          "message: %s", ncclGetLastError(NULL));
    CHECK(big[0] == NULL && big[1] == NULL && big[2] != NULL, "after the timeout");
    OK(ncclCommDestroy(big[2])); /* the new rank's, failed */
    CHECK(grown_sum(old, 2, sum) == ncclSuccess && sum[1] == 3, "the parent still works");
    OK(ncclCommDestroy(old[0]));
    OK(ncclCommDestroy(old[1]));
    shm_leftovers("grow");
}

/* ------------------------------------------------- untrusted segments -- */

/* A joining rank must refuse, with a clear error and without crashing, a
 * segment whose header was tampered with; damage found after joining (a
 * corrupt poison word or ring) is an error too.  Each forgery changes one
 * header field of a real segment (made by rank 0, which then waits) before
 * rank 1 opens it, or one word after both joined. */
typedef struct {
    const char *what;
    size_t offset, size; /* header field */
    uint64_t value;
    const char *expect; /* in rank 1's error */
} forgery;

#define HDR(f) offsetof(n4p_seg_hdr, f), sizeof(((n4p_seg_hdr *)0)->f)
static const forgery forgeries[] = {
    {"off_ranks", HDR(off_ranks), 1ull << 40, "not a valid nccl4py shared memory segment"},
    {"off_data", HDR(off_data), 4096, "offsets do not match"},
    {"off_eager", HDR(off_eager), 4096, "offsets do not match"},
    {"slot_bytes", HDR(slot_bytes), 1ull << 62, "slot size is out of range"},
    {"ring_bytes", HDR(ring_bytes), 8, "ring size is out of range"},
    {"total_bytes", HDR(total_bytes), 1ull << 20, "not a valid"},
    {"nranks", HDR(nranks), 5000, "rank count is out of range"},
    {"magic", HDR(ready), 0x1234, "no header"},
    {"poison", 0, 0, INT32_MAX, "corrupt"}, /* after joining */
    {"ring", 0, 0, 1ull << 40, "corrupt"},   /* after joining */
};

static void segment_path(const ncclUniqueId *id, char *path, size_t len)
{
    size_t n = (size_t)snprintf(path, len, "/dev/shm/nccl4py-");
    for (int i = 0; i < N4P_ID_NAME_LEN; i++)
        n += (size_t)snprintf(path + n, len - n, "%02x",
                              (unsigned char)id->internal[N4P_ID_NAME_OFF + i]);
}

static void forged_rank(const forgery *f, const ncclUniqueId *id, int rank)
{
    alarm(RANK_ALARM);
    failures = 0;
    ncclComm_t c = NULL;
    float x[4] = {1, 2, 3, 4};
    ncclResult_t rc = ncclCommInitRank(&c, 2, *id, rank);
    bool later = f->size == 0;
    if (rank == 0) { /* the creator: take part in what follows, whatever happens */
        usleep(300000); /* let rank 1 be the one that waits */
        if (rc == ncclSuccess && strcmp(f->what, "ring") == 0)
            ncclRecv(x, 4, ncclFloat32, 1, c, NULL);
        else if (rc == ncclSuccess)
            ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, NULL);
        _exit(0);
    }
    if (later) {
        CHECK(rc == ncclSuccess, "%s: join -> %d (%s)", f->what, (int)rc, ncclGetLastError(NULL));
        if (rc != ncclSuccess)
            _exit(1);
        if (strcmp(f->what, "poison") == 0) {
            atomic_store(&c->seg.hdr->poison, (int32_t)f->value);
            rc = ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, NULL);
        } else { /* the receiver's head far beyond what was written */
            atomic_store(&c->seg.rings[1 * 2 + 0].head, f->value);
            rc = ncclSend(x, 4, ncclFloat32, 0, c, NULL);
        }
    }
    const char *msg = ncclGetLastError(c);
    CHECK(rc != ncclSuccess && strstr(msg, f->expect) != NULL, "%s: rank 1 got %d (%s)",
          f->what, (int)rc, msg);
    if (c != NULL)
        ncclCommAbort(c);
    _exit(failures ? 1 : 0);
}

static void t_forged(const forgery *f)
{
    ncclUniqueId id;
    char path[128];
    OK(ncclGetUniqueId(&id));
    segment_path(&id, path, sizeof path);
    fflush(stdout);
    fflush(stderr);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        if (r == 1 && f->size != 0) { /* forge the waiting creator's segment */
            for (int i = 0; i < 20000 && access(path, F_OK) != 0; i++)
                usleep(1000);
            int fd = open(path, O_RDWR | O_CLOEXEC);
            CHECK(fd >= 0, "%s: no segment to forge", f->what);
            if (fd >= 0) {
                CHECK(pwrite(fd, &f->value, f->size, (off_t)f->offset) == (ssize_t)f->size,
                      "pwrite");
                close(fd);
            }
        }
        pids[r] = fork();
        if (pids[r] == 0)
            forged_rank(f, &id, r);
        remember_pid(pids[r]);
    }
    int status = 0;
    waitpid(pids[1], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1 failed (status 0x%x)",
          f->what, status);
    kill(pids[0], SIGKILL);
    waitpid(pids[0], &status, 0);
    unlink(path); /* a forged segment is nobody's to collect */
}

/* Outputs larger than the last-level cache can hold for all ranks are
 * written with streaming stores (copy.c): check them at odd sizes and
 * addresses.  The byte of element i from rank k is a hash of both. */
static unsigned char pat(int k, size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ (size_t)k * 77u);
}

static void t_large_outputs(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t out = (llc > 0 ? (size_t)llc : (8u << 20)) / (size_t)n + 4099;
    if (out > (256u << 20)) {
        printf("  (skipped: a last-level cache of %ld bytes)\n", llc);
        return;
    }
    size_t per = out / (size_t)n, total = per * (size_t)n; /* odd sizes */
    char *sbuf = malloc(total + 1), *rbuf = malloc(total + 1);
    CHECK(sbuf && rbuf, "out of memory");
    if (!sbuf || !rbuf)
        goto done;
    char *send = sbuf + 1, *recv = rbuf + 1; /* unaligned */
    /* allgather */
    for (size_t i = 0; i < per; i++)
        send[i] = (char)pat(rank, i);
    OK(ncclAllGather(send, recv, per, ncclUint8, comm, NULL));
    for (size_t k = 0, bad = 0; k < (size_t)n && !bad; k++)
        for (size_t i = 0; i < per; i++)
            if ((unsigned char)recv[k * per + i] != pat((int)k, i)) {
                CHECK(0, "large allgather: block %zu byte %zu", k, i);
                bad = 1;
                break;
            }
    /* alltoall: block d of rank r holds pat(r * n + d) */
    for (size_t d = 0; d < (size_t)n; d++)
        for (size_t i = 0; i < per; i++)
            send[d * per + i] = (char)pat(rank * n + (int)d, i);
    OK(ncclAlltoAll(send, recv, per, ncclUint8, comm, NULL));
    for (size_t k = 0, bad = 0; k < (size_t)n && !bad; k++)
        for (size_t i = 0; i < per; i++)
            if ((unsigned char)recv[k * per + i] != pat((int)k * n + rank, i)) {
                CHECK(0, "large alltoall: block %zu byte %zu", k, i);
                bad = 1;
                break;
            }
    /* broadcast out of place, from the last rank */
    for (size_t i = 0; i < total; i++)
        send[i] = (char)(rank == n - 1 ? pat(99, i) : 0);
    memset(recv, 0, total);
    OK(ncclBroadcast(send, recv, total, ncclUint8, n - 1, comm, NULL));
    for (size_t i = 0; i < total; i++)
        if ((unsigned char)recv[i] != pat(99, i)) {
            CHECK(0, "large broadcast: byte %zu", i);
            break;
        }
    /* allreduce: byte sums wrap */
    for (size_t i = 0; i < total; i++)
        send[i] = (char)pat(rank, i);
    OK(ncclAllReduce(send, recv, total, ncclUint8, ncclSum, comm, NULL));
    for (size_t i = 0; i < total; i++) {
        unsigned want = 0;
        for (int k = 0; k < n; k++)
            want += pat(k, i);
        if ((unsigned char)recv[i] != (unsigned char)want) {
            CHECK(0, "large allreduce: byte %zu", i);
            break;
        }
    }
done:
    free(sbuf);
    free(rbuf);
}

/* Ranks that wait for nobody run ahead: the root of a broadcast or scatter,
 * the senders of a reduce or gather.  `arg` is a shared page: counters of
 * the calls the runners-ahead finished, which the others wait for before
 * they make the matching calls (so a runner-ahead that waited would hang
 * this test).  Then long mixed sequences, with the readers late, check
 * that no data is overwritten before it was read. */
#define AHEAD 8 /* rounds ahead; at most N4P_DEPTH - 2 */
typedef struct {
    _Atomic int sent[4];
} ahead_state;

static bool wait_counter(_Atomic int *c, int want)
{
    for (int i = 0; i < 60000 && atomic_load(c) < want; i++)
        usleep(1000);
    return atomic_load(c) >= want;
}

static void t_run_ahead(ncclComm_t comm, int rank, int n, void *arg)
{
    ahead_state *st = arg;
    float x[4], y[4 * 4];
    /* broadcast: root 0 finishes AHEAD calls before anybody else starts */
    if (rank == 0) {
        for (int i = 0; i < AHEAD; i++) {
            x[0] = (float)i;
            OK(ncclBroadcast(x, y, 1, ncclFloat32, 0, comm, NULL));
        }
        atomic_store(&st->sent[0], 1);
    } else {
        CHECK(wait_counter(&st->sent[0], 1), "the root of the broadcasts waited");
        for (int i = 0; i < AHEAD; i++) {
            OK(ncclBroadcast(x, y, 1, ncclFloat32, 0, comm, NULL));
            CHECK(y[0] == (float)i, "broadcast %d: %g", i, (double)y[0]);
        }
    }
    /* reduce and gather to the last rank: the others finish first */
    int root = n - 1;
    if (rank != root) {
        for (int i = 0; i < AHEAD / 2; i++) {
            x[0] = (float)(i + rank);
            OK(ncclReduce(x, NULL, 1, ncclFloat32, ncclSum, root, comm, NULL));
            OK(ncclGather(x, NULL, 1, ncclFloat32, root, comm, NULL));
        }
        atomic_fetch_add(&st->sent[1], 1);
    } else {
        CHECK(wait_counter(&st->sent[1], n - 1), "the senders of the reduces waited");
        for (int i = 0; i < AHEAD / 2; i++) {
            x[0] = (float)(i + rank);
            OK(ncclReduce(x, y, 1, ncclFloat32, ncclSum, root, comm, NULL));
            CHECK(y[0] == (float)(n * i + n * (n - 1) / 2), "reduce %d: %g", i, (double)y[0]);
            OK(ncclGather(x, y, 1, ncclFloat32, root, comm, NULL));
            for (int k = 0; k < n; k++)
                CHECK(y[k] == (float)(i + k), "gather %d from %d: %g", i, k, (double)y[k]);
        }
    }
    /* long mixed sequences, small and staged, with the readers late */
    static float big[3][40000], out[3][40000];
    const size_t sizes[] = {1, 1000, 40000};
    for (int i = 0; i < 60; i++) {
        size_t cnt = sizes[i % 3];
        int rt = (i / 3) % n;
        float *b = big[i % 3], *o = out[i % 3];
        if (rank == rt)
            for (size_t j = 0; j < cnt; j++)
                b[j] = (float)(i * 7 + (int)j);
        else if (i % 5 == 0)
            usleep(2000);
        if (i % 2 == 0) {
            OK(ncclBroadcast(b, o, cnt, ncclFloat32, rt, comm, NULL));
        } else {
            for (int k = 0; k < n && rank == rt; k++) /* scatter rt's block k to k */
                for (size_t j = 0; j < cnt / (size_t)n; j++)
                    b[(size_t)k * (cnt / (size_t)n) + j] = (float)(i * 7 + k * 3 + (int)j);
            if (cnt / (size_t)n == 0)
                continue;
            OK(ncclScatter(b, o, cnt / (size_t)n, ncclFloat32, rt, comm, NULL));
        }
        size_t m = i % 2 == 0 ? cnt : cnt / (size_t)n;
        for (size_t j = 0; j < m; j++) {
            float want = i % 2 == 0 ? (float)(i * 7 + (int)j) : (float)(i * 7 + rank * 3 + (int)j);
            if (o[j] != want) {
                CHECK(0, "call %d (%s, count %zu, root %d) element %zu: %g, want %g", i,
                      i % 2 == 0 ? "broadcast" : "scatter", m, rt, j, (double)o[j],
                      (double)want);
                break;
            }
        }
    }
}

static int selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static void header(const char *name, int n)
{
    printf("test %-18s n=%d\n", name, n);
    fflush(stdout);
}

/* The NCCL 2.32 functions from C: a team returned by value, a config
 * collective, a refused config, a parameter read through its handle. */
static void t_api_232(ncclComm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    ncclTeam_t world = ncclTeamWorld(comm), rail = ncclTeamRail(comm);
    CHECK(world.nRanks == n && world.rank == rank && world.stride == 1, "world team");
    CHECK(rail.nRanks == 1 && rail.rank == 0 && rail.stride == n, "rail team");
    for (int i = 0; i < n; i++)
        CHECK(ncclTeamRankToLsa(comm, ncclTeamLsa(comm), i) == i, "lsa rank %d", i);
    CHECK(ncclTeamRankToWorld(comm, rail, 0) == rank, "rail to world");
    CHECK(ncclTeamRankToWorld(comm, world, n) == -1, "outside the team");
    ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
    double x = rank + 1, y = 0;
    OK(ncclAllReduceConfig(&x, &y, 1, ncclFloat64, ncclSum, comm, NULL, &cfg));
    CHECK(y == n * (n + 1) / 2.0, "allreduce config %g", y);
    cfg.size = 8;
    y = -1;
    CHECK(ncclAllReduceConfig(&x, &y, 1, ncclFloat64, ncclSum, comm, NULL, &cfg) ==
              ncclInvalidArgument && y == -1, "config too short for its magic");
    OK(ncclAllReduceConfig(&x, &y, 1, ncclFloat64, ncclSum, comm, NULL, NULL));
    CHECK(y == n * (n + 1) / 2.0, "allreduce without config %g", y);
    ncclParamHandle_t h = NULL;
    uint64_t slot = 1;
    OK(ncclParamBind(&h, "NCCL4PY_HOST_SLOT_BYTES"));
    OK(ncclParamGetU64(h, &slot));
    CHECK(slot == 8192, "slot bytes parameter %llu", (unsigned long long)slot);
    int32_t i32 = 0;
    CHECK(ncclParamGetI32(h, &i32) == ncclInvalidArgument, "typed getter of another type");
}

int main(int argc, char **argv)
{
    alarm(8 * RANK_ALARM);
    setenv("NCCL4PY_HOST_TIMEOUT", "20", 0);
    if (selected(argc, argv, "allreduce"))
        for (int n = 1; n <= 4; n++) {
            header("allreduce", n);
            run_ranks("allreduce", n, t_allreduce, NULL, false);
        }
    if (selected(argc, argv, "allreduce_chunked")) {
        /* tiny slots force many rounds of the large-message paths */
        setenv("NCCL4PY_HOST_SLOT_BYTES", "4096", 1);
        for (int n = 2; n <= 4; n += 2) {
            header("allreduce_chunked", n);
            run_ranks("allreduce_chunked", n, t_allreduce, NULL, false);
        }
        unsetenv("NCCL4PY_HOST_SLOT_BYTES");
    }
    if (selected(argc, argv, "run_ahead"))
        for (int n = 2; n <= 4; n++) {
            ahead_state *st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            CHECK(st != MAP_FAILED, "mmap");
            if (st == MAP_FAILED)
                break;
            header("run_ahead", n);
            run_ranks("run_ahead", n, t_run_ahead, st, false);
            munmap(st, sizeof *st);
        }
    if (selected(argc, argv, "large_outputs"))
        for (int n = 2; n <= 3; n++) {
            header("large_outputs", n);
            run_ranks("large_outputs", n, t_large_outputs, NULL, false);
        }
    if (selected(argc, argv, "collectives"))
        for (int n = 1; n <= 4; n++) {
            header("collectives", n);
            setenv("NCCL4PY_HOST_SLOT_BYTES", n == 3 ? "8192" : "", 1);
            run_ranks("collectives", n, t_rooted_and_gathers, NULL, false);
        }
    unsetenv("NCCL4PY_HOST_SLOT_BYTES");
    if (selected(argc, argv, "p2p")) {
        setenv("NCCL4PY_HOST_RING_BYTES", "4096", 1);
        for (int n = 1; n <= 4; n++) {
            header("p2p", n);
            run_ranks("p2p", n, t_p2p, NULL, false);
        }
        unsetenv("NCCL4PY_HOST_RING_BYTES");
    }
    if (selected(argc, argv, "split"))
        for (int n = 1; n <= 4; n++) {
            header("split", n);
            run_ranks("split", n, t_split, NULL, false);
        }
    if (selected(argc, argv, "args"))
        for (int n = 1; n <= 2; n++) {
            header("args", n);
            run_ranks("args", n, t_args, NULL, false);
        }
    if (selected(argc, argv, "shrink_timeout")) {
        header("shrink_timeout", 2);
        run_ranks("shrink_timeout", 2, t_shrink_timeout, NULL, false);
    }
    if (selected(argc, argv, "mismatch")) {
        header("mismatch", 2);
        run_ranks("mismatch", 2, t_mismatch, NULL, false);
        header("mismatch_root", 2);
        run_ranks("mismatch_root", 2, t_mismatch_root, NULL, false);
    }
    if (selected(argc, argv, "api_232")) {
        setenv("NCCL4PY_HOST_SLOT_BYTES", "8192", 1);
        for (int n = 1; n <= 4; n += 3) {
            header("api_232", n);
            run_ranks("api_232", n, t_api_232, NULL, false);
        }
        unsetenv("NCCL4PY_HOST_SLOT_BYTES");
    }
    if (selected(argc, argv, "abort_thread")) {
        header("abort_thread", 2);
        run_ranks("abort_thread", 2, t_abort_thread, NULL, false);
    }
    if (selected(argc, argv, "init_all")) {
        header("init_all", 3);
        t_init_all();
    }
    if (selected(argc, argv, "grow")) {
        header("grow", 4);
        t_grow();
    }
    if (selected(argc, argv, "group_child_error")) {
        header("group_child_error", 2);
        t_group_child_error();
    }
    if (selected(argc, argv, "kill")) {
        setenv("NCCL4PY_HOST_TIMEOUT", "3", 1);
        header("kill", 3);
        int tag = -99;
        run_ranks("kill", 3, t_kill, &tag, false);
        setenv("NCCL4PY_HOST_TIMEOUT", "20", 1);
    }
    if (selected(argc, argv, "missing_rank")) {
        setenv("NCCL4PY_HOST_TIMEOUT", "1.5", 1);
        header("missing_rank", 3);
        struct {
            int tag[2];
            ncclUniqueId id;
        } a = {{0, 0}, {{0}}};
        OK(ncclGetUniqueId(&a.id));
        run_ranks("missing_rank", 3, t_missing_rank, &a, true);
        setenv("NCCL4PY_HOST_TIMEOUT", "20", 1);
    }
    if (selected(argc, argv, "forged"))
        for (size_t i = 0; i < sizeof forgeries / sizeof forgeries[0]; i++) {
            header("forged", 2);
            printf("  %s\n", forgeries[i].what);
            t_forged(&forgeries[i]);
        }
    shm_leftovers("end");
    printf("%s (%d failures)\n", failures ? "FAILED" : "OK", failures);
    return failures ? 1 : 0;
}
