/*
 * shm.c - the shared-memory segment of a communicator, named by its unique
 * id (ids.c).
 *
 * Creation.  The first rank to arrive makes the segment as an unnamed file
 * (O_TMPFILE, mode 0600), lays it out, claims its rank, and only then links
 * it under its name; if another rank linked one first, it joins that one.
 * So a name never refers to a half-made segment, and a rank killed while
 * creating leaves nothing.  Its memory is reserved on the way (shmspace.c):
 * what joining ranks write before the name, the rest after it, before the
 * creator counts itself in `joined`, so no rank uses that part earlier.  A joining rank trusts nothing it opens: the
 * file must be this user's, with mode 0600, and its header must describe
 * exactly the layout its sizes imply and the file's size; it then uses only
 * its own validated copy of the sizes and offsets.
 *
 * Removal.  The name is needed only until every rank has attached: the rank
 * completing the set removes it, and so does every rank once it sees the
 * set complete, so it is gone as soon as possible.  A rank that fails to
 * join (another nranks, a rank taken twice) poisons the segment, so that the
 * others fail at once, and removes the name; ranks that give up waiting
 * (timeout, interrupt, a dead peer) remove it too.  What remains is the case
 * nobody can handle in-process: every process of a job killed (SIGKILL)
 * before the set completed.  Those names are collected when any rank of this
 * user creates a segment later (sweep_stale): a segment whose attached
 * processes are all gone is removed.
 *
 * Layout (offsets 4 KiB aligned):
 *   header | n4p_rank_ctl[n] | n4p_ring_ctl[n*n] |
 *   collective staging: 2 sets x (n slots + 1 result slot) |
 *   eager entries: n x N4P_DEPTH | rings: n*n
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

/* The largest nranks a communicator may have; python -m nccl.run reads it to
 * refuse a job it could not start. */
N4P_EXPORT int nccl4pyHostMaxRanks(void);
N4P_EXPORT int nccl4pyHostMaxRanks(void)
{
    return N4P_MAX_RANKS;
}

/* Identity of our PID namespace (its inode), 0 when unknown. */
static uint64_t pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ---------------------------------------------------------------- layout -- */

static bool add_ok(uint64_t *acc, uint64_t a, uint64_t b)
{
    if (b != 0 && a > UINT64_MAX / b)
        return false;
    if (*acc > UINT64_MAX - a * b)
        return false;
    *acc += a * b;
    return true;
}

static uint64_t page_up(uint64_t v)
{
    return (v + N4P_PAGE - 1) / N4P_PAGE * N4P_PAGE;
}

/* Fill the offsets and total size of a segment for n ranks with the given
 * slot and ring sizes; false when it would exceed N4P_MAX_SEGMENT. */
static bool layout(n4p_seg_hdr *h, int n, uint64_t slot, uint64_t ring)
{
    const uint64_t nn = (uint64_t)n;
    uint64_t off = N4P_PAGE;
    h->nranks = n;
    h->slot_bytes = slot;
    h->ring_bytes = ring;
    h->off_ranks = off;
    if (!add_ok(&off, nn, sizeof(n4p_rank_ctl)))
        return false;
    h->off_rings = off = page_up(off);
    if (!add_ok(&off, nn * nn, sizeof(n4p_ring_ctl)))
        return false;
    h->off_coll = off = page_up(off);
    if (!add_ok(&off, 2 * (nn + 1), slot))
        return false;
    h->off_eager = off = page_up(off);
    if (!add_ok(&off, nn * N4P_DEPTH, N4P_EAGER_BYTES))
        return false;
    h->off_data = off = page_up(off);
    if (!add_ok(&off, nn * nn, ring))
        return false;
    h->total_bytes = page_up(off);
    return h->total_bytes <= N4P_MAX_SEGMENT;
}

/* The slot and ring sizes a new segment gets: the settings' or automatic
 * ones, adjusted so that every collective can make progress. */
static void choose_sizes(int n, const n4p_settings *s, uint64_t *slot, uint64_t *ring)
{
    const uint64_t nn = (uint64_t)n;
    uint64_t v = s->slot_bytes;
    if (v == 0) { /* 16 MiB over all slots, within 64 KiB .. 512 KiB: rounds
                     of a few hundred KiB keep the staged data in the cache */
        v = (16u << 20) / (nn + 1);
        v = v > (512u << 10) ? (512u << 10) : v < (64u << 10) ? (64u << 10) : v;
    }
    if (v < nn * 64) /* reduce-scatter needs one 8-byte element per rank and more */
        v = nn * 64;
    *slot = page_up(v);
    v = s->ring_bytes;
    if (v == 0) { /* 32 MiB over all rings, within 64 KiB .. 1 MiB */
        v = (32u << 20) / (nn * nn);
        v = v > (1u << 20) ? (1u << 20) : v < (64u << 10) ? (64u << 10) : v;
    }
    *ring = (v + N4P_CACHELINE - 1) / N4P_CACHELINE * N4P_CACHELINE;
}

/* Check a copy of a segment's header against the size of its file: every
 * size within its range, every offset exactly where layout() puts it, so
 * all of them lie inside the file.  NULL when valid, else what is wrong. */
static const char *header_problem(const n4p_seg_hdr *h, uint64_t ready, uint64_t file_size)
{
    if (file_size < sizeof *h || ready != N4P_SEG_MAGIC)
        return "it has no header of this version of the host backend";
    if (h->nranks < 1 || h->nranks > N4P_MAX_RANKS)
        return "its rank count is out of range";
    const uint64_t nn = (uint64_t)h->nranks;
    if (h->slot_bytes % N4P_PAGE != 0 || h->slot_bytes < N4P_MIN_SLOT ||
        h->slot_bytes < nn * 64 || h->slot_bytes > N4P_MAX_BUF)
        return "its slot size is out of range";
    if (h->ring_bytes % N4P_CACHELINE != 0 || h->ring_bytes < N4P_MIN_RING ||
        h->ring_bytes > N4P_MAX_BUF)
        return "its ring size is out of range";
    n4p_seg_hdr want;
    memset(&want, 0, sizeof want);
    if (!layout(&want, h->nranks, h->slot_bytes, h->ring_bytes) ||
        want.off_ranks != h->off_ranks || want.off_rings != h->off_rings ||
        want.off_coll != h->off_coll || want.off_eager != h->off_eager ||
        want.off_data != h->off_data ||
        want.total_bytes != h->total_bytes)
        return "its offsets do not match its sizes";
    if (h->total_bytes != file_size)
        return "its size does not match its header";
    return NULL;
}

/* A private copy of the fields of a mapped header (not the atomics). */
static uint64_t copy_header(n4p_seg_hdr *dst, const void *base)
{
    const n4p_seg_hdr *src = base;
    memset(dst, 0, sizeof *dst);
    uint64_t ready = atomic_load_explicit(&((n4p_seg_hdr *)base)->ready, memory_order_acquire);
    /* the fields the creator writes once: from nranks up to joined */
    const size_t first = offsetof(n4p_seg_hdr, nranks);
    memcpy((char *)dst + first, (const char *)src + first,
           offsetof(n4p_seg_hdr, joined) - first);
    return ready;
}

/* Point `s` into the mapping, from a validated copy of its header. */
static void bind_seg(n4p_seg *s, void *base, size_t size, const n4p_seg_hdr *valid)
{
    s->base = base;
    s->size = size;
    s->slot_bytes = (size_t)valid->slot_bytes;
    s->ring_bytes = (size_t)valid->ring_bytes;
    s->hdr = (n4p_seg_hdr *)base;
    s->ranks = (n4p_rank_ctl *)((char *)base + valid->off_ranks);
    s->rings = (n4p_ring_ctl *)((char *)base + valid->off_rings);
    s->coll = (char *)base + valid->off_coll;
    s->eager = (char *)base + valid->off_eager;
    s->data = (char *)base + valid->off_data;
}

/* --------------------------------------------------------- stale names -- */

#define SWEEP_PERIOD 10 /* seconds between two sweeps of one process */

static bool is_segment_name(const char *name)
{
    size_t p = sizeof N4P_SHM_PREFIX - 1;
    if (strncmp(name, N4P_SHM_PREFIX, p) != 0 || strlen(name) != p + 2 * (size_t)N4P_ID_NAME_LEN)
        return false;
    for (const char *c = name + p; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* Is the segment open on fd a name nobody needs any more: every rank has
 * attached, or every process that attached is gone?  Only segments of this
 * user and PID namespace with a valid header are judged. */
static bool stale(int fd, uint64_t pidns)
{
    struct stat st;
    n4p_seg_hdr h;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return false;
    uint64_t ready;
    memcpy(&ready, &h, sizeof ready);
    if (header_problem(&h, ready, (uint64_t)st.st_size) != NULL || h.pidns != pidns)
        return false;
    int32_t joined;
    memcpy(&joined, (char *)&h + offsetof(n4p_seg_hdr, joined), sizeof joined);
    if (joined >= h.nranks)
        return true;
    for (int r = 0; r < h.nranks; r++) {
        n4p_rank_ctl c;
        off_t at = (off_t)(h.off_ranks + (uint64_t)r * sizeof c);
        if (pread(fd, &c, sizeof c, at) != (ssize_t)sizeof c)
            return false;
        int32_t state;
        memcpy(&state, (char *)&c + offsetof(n4p_rank_ctl, state), sizeof state);
        if ((state < 0 && !n4p_process_gone((int32_t)(-(int64_t)state), 0)) ||
            (state == N4P_RANK_JOINED && !n4p_process_gone(c.pid, c.starttime)))
            return false;
    }
    return true;
}

/* Remove the names of segments whose jobs died before every rank attached
 * (a SIGKILL cannot be caught, so nobody else removes them); how many. */
static int sweep(void)
{
    uint64_t ns = pid_namespace();
    DIR *d = ns != 0 ? opendir(N4P_SHM_DIR) : NULL;
    if (d == NULL)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_segment_name(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            continue;
        if (stale(fd, ns) && unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}

/* The sweep when a rank creates a segment: at most every SWEEP_PERIOD
 * seconds per process. */
static void sweep_stale(void)
{
    static _Atomic long long last;
    long long now = (long long)n4p_now() + 1;
    long long prev = atomic_load(&last);
    if ((prev != 0 && now - prev < SWEEP_PERIOD) ||
        !atomic_compare_exchange_strong(&last, &prev, now))
        return;
    (void)sweep();
}

/* For python -m nccl.run, once every rank of a job has exited: the ranks it
 * stopped while they waited in creation (a rank left before creating its
 * communicator) had no chance to remove their segment's name.  The same
 * sweep, now; returns how many names it removed. */
N4P_EXPORT int nccl4pyHostRemoveStale(void);
N4P_EXPORT int nccl4pyHostRemoveStale(void)
{
    return sweep();
}

/* ------------------------------------------------------ attach / detach -- */

void n4p_seg_unlink(ncclComm_t comm)
{
    if (comm->shm_name[0] != '\0') {
        unlink(comm->shm_name);
        comm->shm_name[0] = '\0';
    }
}

/* Record a failure that concerns every rank in the header (a rank that
 * could not join), so that the others fail at once instead of waiting. */
static void poison_header(n4p_seg_hdr *h, ncclResult_t rc, const char *msg)
{
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&h->err_claim, &zero, 1)) {
        h->errcode = (int32_t)rc;
        snprintf(h->errmsg, sizeof h->errmsg, "%s", msg);
        zero = 0;
        atomic_compare_exchange_strong(&h->poison, &zero, N4P_POISON_HDR);
    }
    atomic_fetch_add(&h->wake, 1);
    syscall(SYS_futex, (uint32_t *)&h->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Claim our rank in a mapped, validated segment. */
static bool claim_rank(ncclComm_t comm)
{
    n4p_rank_ctl *me = &comm->seg.ranks[comm->rank];
    int32_t expected = N4P_RANK_EMPTY;
    if (!atomic_compare_exchange_strong(&me->state, &expected, N4P_RANK_CLAIMING(getpid())))
        return false;
    me->pid = (int32_t)getpid();
    me->starttime = n4p_proc_starttime(getpid(), NULL);
    me->probe_addr = (uint64_t)(uintptr_t)&comm->magic;
    atomic_store_explicit(&me->state, N4P_RANK_JOINED, memory_order_release);
    return true;
}

static ncclResult_t map_fail(ncclComm_t comm, void *base, size_t size, ncclResult_t rc)
{
    if (base != NULL && base != MAP_FAILED)
        munmap(base, size);
    memset(&comm->seg, 0, sizeof comm->seg);
    return rc;
}

/* Create the segment as an unnamed file, lay it out, claim our rank, then
 * give it its name: a name never refers to a half-made segment.  *raced is
 * set when another rank named its segment first (then join that one). */
static ncclResult_t seg_create(ncclComm_t comm, bool *raced)
{
    const int n = comm->nranks;
    n4p_seg_hdr h;
    uint64_t slot, ring;
    memset(&h, 0, sizeof h);
    choose_sizes(n, &comm->env, &slot, &ring);
    if (!layout(&h, n, slot, ring))
        return n4p_fail(comm, ncclInvalidArgument,
                        "a segment for %d ranks with %llu-byte slots and %llu-byte rings "
                        "would exceed %llu bytes; lower NCCL4PY_HOST_SLOT_BYTES or "
                        "NCCL4PY_HOST_RING_BYTES",
                        n, (unsigned long long)slot, (unsigned long long)ring,
                        (unsigned long long)N4P_MAX_SEGMENT);
    sweep_stale();
    int fd = open(N4P_SHM_DIR, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return n4p_fail(comm, ncclSystemError,
                        "cannot create an unnamed file in " N4P_SHM_DIR " (O_TMPFILE): %s",
                        strerror(errno));
    const size_t size = (size_t)h.total_bytes;
    void *base = MAP_FAILED;
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)size) != 0 ||
        (base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        int e = errno;
        close(fd);
        comm->shm_name[0] = '\0'; /* the name may be another rank's by now */
        return n4p_fail(comm, ncclSystemError,
                        "cannot make a %zu-byte shared memory segment in " N4P_SHM_DIR ": %s",
                        size, strerror(e));
    }
    /* what a joining rank writes (shmspace.c) */
    ncclResult_t res = n4p_space_head(comm, fd, base, &h);
    if (res == ncclSuccess && n == 1)
        res = n4p_space_body(comm, fd, base, &h);
    if (res != ncclSuccess) {
        close(fd);
        comm->shm_name[0] = '\0';
        return map_fail(comm, base, size, res);
    }
    n4p_seg_hdr *sh = base;
    h.creator_pid = (int32_t)getpid();
    h.creator_start = n4p_proc_starttime(getpid(), NULL);
    h.pidns = pid_namespace();
    memcpy((void *)sh, &h, sizeof h); /* `joined` 0: see below */
    bind_seg(&comm->seg, base, size, &h);
    claim_rank(comm);
    atomic_store_explicit(&sh->ready, N4P_SEG_MAGIC, memory_order_release);
    int rc = 0;
    if (n > 1) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        rc = linkat(AT_FDCWD, proc, AT_FDCWD, comm->shm_name, AT_SYMLINK_FOLLOW);
        if (rc != 0 && errno == ENOENT) /* no /proc: needs CAP_DAC_READ_SEARCH */
            rc = linkat(fd, "", AT_FDCWD, comm->shm_name, AT_EMPTY_PATH);
    }
    int e = errno;
    if (rc == 0) {
        /* The rest is reserved only now, so that a rank creating at the
         * same moment is not refused for lack of the space we take (it
         * joins us).  Nobody touches it before this rank counts itself as
         * joined; a shortage fails the ranks already waiting at once. */
        if (n > 1 && (res = n4p_space_body(comm, fd, base, &h)) != ncclSuccess) {
            close(fd);
            poison_header(sh, res, comm->errmsg);
            n4p_seg_unlink(comm);
            return map_fail(comm, base, size, res);
        }
        close(fd);
        if (n == 1)
            comm->shm_name[0] = '\0'; /* never named */
        if (atomic_fetch_add(&sh->joined, 1) + 1 >= n)
            n4p_seg_unlink(comm); /* the others attached meanwhile */
        n4p_notify(comm);
        return ncclSuccess;
    }
    close(fd);
    map_fail(comm, base, size, ncclSuccess);
    if (e == EEXIST) {
        *raced = true;
        return ncclSuccess;
    }
    ncclResult_t failed = n4p_fail(comm, ncclSystemError,
                                   "cannot name the shared memory segment %s: %s",
                                   comm->shm_name, strerror(e));
    comm->shm_name[0] = '\0';
    return failed;
}

/* Join the segment open on fd, after checking that it can be trusted. */
static ncclResult_t seg_join(ncclComm_t comm, int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return n4p_fail(comm, ncclSystemError, "fstat of %s failed: %s", name,
                        strerror(errno));
    comm->shm_name[0] = '\0'; /* not ours to remove until it proves valid */
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600)
        return n4p_fail(comm, ncclSystemError,
                        "refusing shared memory %s: %s (owned by uid %d, mode %04o); a "
                        "segment must be a file owned by this user (uid %d) with mode 0600",
                        name, !S_ISREG(st.st_mode) ? "not a regular file"
                              : st.st_uid != geteuid() ? "another user's file"
                                                       : "its permissions are not 0600",
                        (int)st.st_uid, (unsigned)(st.st_mode & 07777), (int)geteuid());
    const size_t size = (size_t)st.st_size;
    void *base = size >= sizeof(n4p_seg_hdr)
                     ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                     : MAP_FAILED;
    if (base == MAP_FAILED && size >= sizeof(n4p_seg_hdr))
        return n4p_fail(comm, ncclSystemError, "mmap of %s failed: %s", name, strerror(errno));
    n4p_seg_hdr h;
    uint64_t ready = base != MAP_FAILED ? copy_header(&h, base) : 0;
    const char *bad = header_problem(&h, ready, (uint64_t)size);
    if (bad != NULL) {
        map_fail(comm, base, size, ncclSuccess);
        return n4p_fail(comm, ncclSystemError,
                        "%s is not a valid nccl4py shared memory segment: %s", name, bad);
    }
    n4p_seg_hdr *sh = base;
    char msg[N4P_ERRLEN];
    ncclResult_t rc = ncclSuccess;
    if (h.nranks != comm->nranks) {
        snprintf(msg, sizeof msg,
                 "nranks mismatch: rank %d (pid %d) passed nranks %d, the communicator was "
                 "created with %d",
                 comm->rank, (int)getpid(), comm->nranks, h.nranks);
        rc = ncclInvalidUsage;
    } else if (h.pidns != 0 && pid_namespace() != 0 && h.pidns != pid_namespace()) {
        snprintf(msg, sizeof msg,
                 "rank %d (pid %d) is in another PID namespace than the rank that created "
                 "the communicator; all ranks must share one",
                 comm->rank, (int)getpid());
        rc = ncclInvalidUsage;
    } else {
        bind_seg(&comm->seg, base, size, &h);
        if (!claim_rank(comm)) {
            snprintf(msg, sizeof msg, "rank %d joined the communicator twice", comm->rank);
            rc = ncclInvalidUsage;
        }
    }
    snprintf(comm->shm_name, sizeof comm->shm_name, "%s", name);
    if (rc != ncclSuccess) {
        /* the job cannot complete: tell the others now, remove the name */
        poison_header(sh, rc, msg);
        n4p_seg_unlink(comm);
        map_fail(comm, base, size, ncclSuccess);
        return n4p_fail(comm, rc, "%s", msg);
    }
    if (atomic_fetch_add(&sh->joined, 1) + 1 >= comm->nranks)
        n4p_seg_unlink(comm); /* the set is complete: the name is not needed */
    n4p_notify(comm);
    return ncclSuccess;
}

/* Create or join the segment named by `id` and claim our rank. */
ncclResult_t n4p_seg_attach(ncclComm_t comm, const ncclUniqueId *id)
{
    const unsigned char *raw = (const unsigned char *)id->internal;
    char *w = comm->shm_name;
    w += sprintf(w, N4P_SHM_DIR "/" N4P_SHM_PREFIX);
    for (int i = 0; i < N4P_ID_NAME_LEN; i++)
        w += sprintf(w, "%02x", raw[N4P_ID_NAME_OFF + i]);
    memcpy(comm->secret, raw + N4P_ID_SECRET_OFF, N4P_ID_SECRET_LEN);
    char name[N4P_SHM_NAME_MAX];
    memcpy(name, comm->shm_name, sizeof name);

    const int n = comm->nranks;
    if (n > N4P_MAX_RANKS)
        return n4p_fail(comm, ncclInvalidArgument,
                        "nranks %d exceeds the host backend limit of %d", n, N4P_MAX_RANKS);
    for (int tries = 0; tries < 1000; tries++) {
        memcpy(comm->shm_name, name, sizeof name);
        int fd = n > 1 ? open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (fd >= 0) {
            ncclResult_t rc = seg_join(comm, fd, name);
            close(fd);
            return rc;
        }
        if (n > 1 && errno != ENOENT) {
            comm->shm_name[0] = '\0';
            return n4p_fail(comm, ncclSystemError, "cannot open shared memory %s: %s", name,
                            strerror(errno));
        }
        bool raced = false;
        ncclResult_t rc = seg_create(comm, &raced);
        if (!raced)
            return rc;
    }
    comm->shm_name[0] = '\0';
    return n4p_fail(comm, ncclSystemError,
                    "could not create or join shared memory %s: it kept appearing and "
                    "disappearing",
                    name);
}

void n4p_seg_detach(ncclComm_t comm)
{
    if (comm->seg.base == NULL)
        return;
    n4p_rank_ctl *me = &comm->seg.ranks[comm->rank];
    atomic_store_explicit(&me->state, N4P_RANK_LEFT, memory_order_release);
    n4p_notify(comm);
    munmap(comm->seg.base, comm->seg.size);
    memset(&comm->seg, 0, sizeof comm->seg);
}
