/*
 * shm.c - unique ids and the shared-memory segment of a communicator.
 *
 * A unique id is 128 bytes: an 8-byte tag ("n4phost1"), 16 random bytes that
 * name the segment ("/nccl4py-<32 hex digits>"), 32 random "secret" bytes
 * that never appear in a name (communicators created by split and shrink
 * derive their ids from them, so their names are just as unguessable), and
 * random filler.
 *
 * The first rank to arrive creates the segment (O_EXCL, mode 0600), sizes it
 * and publishes the layout; later ranks open it, wait for the layout and map
 * it.  The rank whose arrival completes the set unlinks the name at once:
 * from then on the memory lives only in the mappings, so nothing is left in
 * /dev/shm however the processes end.  If the set never completes (a rank
 * never arrives), every rank that gives up unlinks the name too.
 *
 * Layout (offsets 4 KiB aligned):
 *   header | n4p_rank_ctl[n] | n4p_ring_ctl[n*n] |
 *   collective staging: 2 sets x (n slots + 1 result slot) | rings: n*n
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define PAGE 4096u
#define MAX_RANKS 1024

/* The largest nranks a communicator may have; python -m nccl.run reads it to
 * refuse a job it could not start. */
N4P_EXPORT int nccl4pyHostMaxRanks(void);
N4P_EXPORT int nccl4pyHostMaxRanks(void)
{
    return MAX_RANKS;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

ncclResult_t n4p_random_id(ncclUniqueId *id)
{
    unsigned char *p = (unsigned char *)id->internal;
    size_t got = N4P_ID_TAG_LEN;
    memcpy(p, N4P_ID_TAG, N4P_ID_TAG_LEN); /* NOLINT(bugprone-not-null-terminated-result): a binary tag */
    while (got < NCCL_UNIQUE_ID_BYTES) {
        ssize_t r = getrandom(p + got, NCCL_UNIQUE_ID_BYTES - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return n4p_fail(NULL, ncclSystemError, "getrandom failed: %s",
                            strerror(errno));
        }
        got += (size_t)r;
    }
    return ncclSuccess;
}

void n4p_derive_id(const unsigned char *secret, uint64_t kind, uint64_t counter,
                   uint64_t extra, ncclUniqueId *out)
{
    uint64_t h = 0x6e34706465726976ull;
    for (int i = 0; i < N4P_ID_SECRET_LEN; i += 8) {
        uint64_t w;
        memcpy(&w, secret + i, 8);
        h = mix64(h ^ w);
    }
    h = mix64(h ^ kind);
    h = mix64(h ^ counter);
    h = mix64(h ^ extra);
    unsigned char *p = (unsigned char *)out->internal;
    memcpy(p, N4P_ID_TAG, N4P_ID_TAG_LEN); /* NOLINT(bugprone-not-null-terminated-result): a binary tag */
    for (int i = N4P_ID_TAG_LEN; i < NCCL_UNIQUE_ID_BYTES; i += 8) {
        uint64_t w = mix64(h + (uint64_t)i);
        memcpy(p + i, &w, 8);
    }
}

bool n4p_id_valid(const ncclUniqueId *id)
{
    return memcmp(id->internal, N4P_ID_TAG, N4P_ID_TAG_LEN) == 0;
}

/* Start time (clock ticks since boot) of a process and its state letter;
 * 0 when the process does not exist. */
uint64_t n4p_proc_starttime(pid_t pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    /* Fields after the command: state is field 3, starttime field 22. */
    unsigned long long start = 0;
    char st = '?';
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok != NULL;
         tok = strtok_r(NULL, " ", &save), field++) {
        if (field == 3)
            st = tok[0];
        if (field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (state != NULL)
        *state = st;
    return start ? (uint64_t)start : 1;
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return dflt;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || v == 0)
        return dflt;
    return (size_t)v;
}

static void layout(n4p_seg_hdr *h, int n)
{
    size_t nn = (size_t)n;
    size_t slot = 16u << 20;
    slot /= nn + 1;
    if (slot > (4u << 20))
        slot = 4u << 20;
    if (slot < (64u << 10))
        slot = 64u << 10;
    slot = env_size("NCCL4PY_HOST_SLOT_BYTES", slot);
    if (slot < nn * 64)
        slot = nn * 64;
    slot = align_up(slot, PAGE);

    size_t ring = (32u << 20) / (nn * nn);
    if (ring > (1u << 20))
        ring = 1u << 20;
    if (ring < (64u << 10))
        ring = 64u << 10;
    ring = env_size("NCCL4PY_HOST_RING_BYTES", ring);
    if (ring < 256)
        ring = 256;
    ring = align_up(ring, N4P_CACHELINE);

    h->nranks = n;
    h->slot_bytes = slot;
    h->ring_bytes = ring;
    h->off_ranks = PAGE;
    h->off_rings = align_up(h->off_ranks + nn * sizeof(n4p_rank_ctl), PAGE);
    h->off_coll = align_up(h->off_rings + nn * nn * sizeof(n4p_ring_ctl), PAGE);
    h->off_data = align_up(h->off_coll + 2 * (nn + 1) * slot, PAGE);
    h->total_bytes = align_up(h->off_data + nn * nn * ring, PAGE);
}

static void bind_seg(n4p_seg *s, void *base, size_t size)
{
    s->base = base;
    s->size = size;
    s->hdr = (n4p_seg_hdr *)base;
    s->ranks = (n4p_rank_ctl *)((char *)base + s->hdr->off_ranks);
    s->rings = (n4p_ring_ctl *)((char *)base + s->hdr->off_rings);
    s->coll = (char *)base + s->hdr->off_coll;
    s->data = (char *)base + s->hdr->off_data;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool past(double deadline)
{
    return deadline > 0 && n4p_now() > deadline;
}

void n4p_seg_unlink(ncclComm_t comm)
{
    if (comm->shm_name[0] != '\0') {
        shm_unlink(comm->shm_name);
        comm->shm_name[0] = '\0';
    }
}

/* Open or create the segment named by `id`, map it and claim our rank. */
ncclResult_t n4p_seg_attach(ncclComm_t comm, const ncclUniqueId *id)
{
    const unsigned char *raw = (const unsigned char *)id->internal;
    char *w = comm->shm_name;
    w += sprintf(w, "/nccl4py-");
    for (int i = 0; i < N4P_ID_NAME_LEN; i++)
        w += sprintf(w, "%02x", raw[N4P_ID_NAME_OFF + i]);
    memcpy(comm->secret, raw + N4P_ID_SECRET_OFF, N4P_ID_SECRET_LEN);

    const int n = comm->nranks;
    if (n > MAX_RANKS)
        return n4p_fail(comm, ncclInvalidArgument,
                        "nranks %d exceeds the host backend limit of %d", n,
                        MAX_RANKS);
    const double deadline = comm->timeout > 0 ? n4p_now() + comm->timeout : 0;
    void *base = MAP_FAILED;
    size_t size = 0;
    for (;;) {
        int fd = shm_open(comm->shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                          0600);
        if (fd >= 0) {
            n4p_seg_hdr tmp;
            memset(&tmp, 0, sizeof tmp);
            layout(&tmp, n);
            size = tmp.total_bytes;
            if (ftruncate(fd, (off_t)size) != 0) {
                int e = errno;
                close(fd);
                shm_unlink(comm->shm_name);
                return n4p_fail(comm, ncclSystemError,
                                "cannot size shared memory %s to %zu bytes: %s",
                                comm->shm_name, size, strerror(e));
            }
            base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (base == MAP_FAILED) {
                int e = errno;
                shm_unlink(comm->shm_name);
                return n4p_fail(comm, ncclSystemError, "mmap of %s failed: %s",
                                comm->shm_name, strerror(e));
            }
            n4p_seg_hdr *h = (n4p_seg_hdr *)base;
            tmp.ready = 0;
            memcpy((void *)h, &tmp, sizeof tmp);
            atomic_store_explicit(&h->ready, N4P_SEG_MAGIC, memory_order_release);
            break;
        }
        if (errno != EEXIST)
            return n4p_fail(comm, ncclSystemError,
                            "cannot create shared memory %s: %s", comm->shm_name,
                            strerror(errno));
        fd = shm_open(comm->shm_name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            if (errno == ENOENT)
                continue; /* unlinked in between: try to create it again */
            return n4p_fail(comm, ncclSystemError,
                            "cannot open shared memory %s: %s", comm->shm_name,
                            strerror(errno));
        }
        struct stat st;
        for (;;) {
            if (fstat(fd, &st) != 0) {
                int e = errno;
                close(fd);
                return n4p_fail(comm, ncclSystemError, "fstat of %s failed: %s",
                                comm->shm_name, strerror(e));
            }
            if (st.st_size > 0)
                break;
            if (past(deadline)) {
                close(fd);
                shm_unlink(comm->shm_name);
                return n4p_fail(comm, ncclTimeout,
                                "timed out waiting for shared memory %s to be "
                                "initialised by another rank",
                                comm->shm_name);
            }
            sleep_ms(1);
        }
        size = (size_t)st.st_size;
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED)
            return n4p_fail(comm, ncclSystemError, "mmap of %s failed: %s",
                            comm->shm_name, strerror(errno));
        n4p_seg_hdr *h = (n4p_seg_hdr *)base;
        while (atomic_load_explicit(&h->ready, memory_order_acquire) !=
               N4P_SEG_MAGIC) {
            if (past(deadline)) {
                munmap(base, size);
                shm_unlink(comm->shm_name);
                return n4p_fail(comm, ncclTimeout,
                                "timed out waiting for shared memory %s to be "
                                "initialised by another rank",
                                comm->shm_name);
            }
            sleep_ms(1);
        }
        if (h->nranks != n || h->total_bytes != size) {
            int other = h->nranks;
            munmap(base, size);
            comm->shm_name[0] = '\0'; /* the segment belongs to the others */
            return n4p_fail(comm, ncclInvalidUsage,
                            "nranks mismatch: this rank passed %d, the "
                            "communicator was created with %d",
                            n, other);
        }
        break;
    }

    bind_seg(&comm->seg, base, size);
    n4p_rank_ctl *me = &comm->seg.ranks[comm->rank];
    int expected = N4P_RANK_EMPTY;
    if (!atomic_compare_exchange_strong(&me->state, &expected, 3)) {
        munmap(base, size);
        memset(&comm->seg, 0, sizeof comm->seg);
        comm->shm_name[0] = '\0';
        return n4p_fail(comm, ncclInvalidUsage,
                        "rank %d joined the communicator twice", comm->rank);
    }
    me->pid = (int32_t)getpid();
    me->starttime = n4p_proc_starttime(getpid(), NULL);
    atomic_store_explicit(&me->state, N4P_RANK_JOINED, memory_order_release);
    int joined = atomic_fetch_add(&comm->seg.hdr->joined, 1) + 1;
    if (joined == n)
        n4p_seg_unlink(comm);
    n4p_notify(comm);
    return ncclSuccess;
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
