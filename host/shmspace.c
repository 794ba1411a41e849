/*
 * shmspace.c - reserving the memory of a segment before anything touches it.
 *
 * A segment is a file in /dev/shm (a tmpfs) whose pages are allocated when
 * they are first written.  When /dev/shm is full (a container's 64 MiB, other
 * jobs' files), that first write cannot fail: the kernel kills the process
 * with SIGBUS, and a process_vm_readv into such a page fails with EFAULT,
 * which looks like a bad buffer of the peer.  So every part of a segment is
 * reserved before it is used, and a shortage is an ncclSystemError naming
 * /dev/shm, the bytes needed and the bytes free, on the rank that needed them:
 *
 *  - the head (header and rank control blocks), which a joining rank writes,
 *    by the creator before it gives the segment its name (shm.c);
 *  - the body (ring control words, staging slots, eager entries), which
 *    every collective may touch, by the creator right after naming it and
 *    before it counts itself as joined, so nobody uses the body before it is
 *    reserved; a shortage there poisons the header, and the ranks already
 *    waiting fail at once with its message;
 *  - the point-to-point ring from rank s to rank d, which grows with n^2
 *    and of which most jobs use a few, by s before its first send to d: one
 *    system call per peer over the communicator's life, none per call.
 *
 * The head and body are reserved with fallocate(2) (in pieces, so that a
 * stream of signals cannot undo a large one for ever), falling back to
 * madvise(MADV_POPULATE_WRITE) on a file system without fallocate; the
 * rings with MADV_POPULATE_WRITE (Linux 5.14), which needs no descriptor.
 * On an older kernel the creator reserves the rings with the body.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate, MADV_POPULATE_WRITE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "transport.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define FALLOCATE_PIECE (64ull << 20)

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : N4P_PAGE;
}

/* Fault in [p, p + n) for writing (or reading): 0, or the errno.  EINVAL
 * means the kernel lacks MADV_POPULATE_*. */
static int populate(const void *p, size_t n, bool write)
{
    if (n == 0)
        return 0;
    const uintptr_t mask = (uintptr_t)page_size() - 1;
    const uintptr_t start = (uintptr_t)p & ~mask;
    const size_t len = (size_t)((uintptr_t)p + n - start);
    for (;;) {
        if (madvise((void *)start, len, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
            return 0;
        if (errno != EINTR) /* populating again is harmless: done pages stay */
            return errno;
    }
}

/* Whether MADV_POPULATE_WRITE exists: asked once per process, on a page of
 * a segment just mapped (faulting it in is harmless). */
static bool can_populate(void *page)
{
    static _Atomic int known; /* 0: not asked, 1: yes, -1: no */
    int k = atomic_load(&known);
    if (k == 0) {
        k = populate(page, 1, true) == EINVAL ? -1 : 1;
        atomic_store(&known, k);
    }
    return k > 0;
}

/* Allocate [off, off + n) of the file: 0, or the errno. */
static int allocate(int fd, uint64_t off, uint64_t n)
{
    while (n > 0) {
        uint64_t piece = n < FALLOCATE_PIECE ? n : FALLOCATE_PIECE;
        if (fallocate(fd, 0, (off_t)off, (off_t)piece) != 0) {
            if (errno == EINTR) /* tmpfs gives back what it took; try again */
                continue;
            return errno;
        }
        off += piece, n -= piece;
    }
    return 0;
}

/* The error for a reservation that failed with `err`, naming the bytes. */
static ncclResult_t shortage(ncclComm_t comm, int err, uint64_t bytes, const char *what,
                             const char *lower)
{
    struct statvfs sv;
    char avail[48] = "an unknown number of";
    if (statvfs(N4P_SHM_DIR, &sv) == 0)
        snprintf(avail, sizeof avail, "%llu",
                 (unsigned long long)sv.f_bavail * (unsigned long long)sv.f_frsize);
    /* a failed MADV_POPULATE_WRITE says EFAULT where the page could not be had */
    const char *why = err == EFAULT || err == ENOSPC ? "not enough free space" : strerror(err);
    return n4p_fail(comm, ncclSystemError,
                    "%s: cannot reserve %llu bytes of shared memory in " N4P_SHM_DIR
                    " for %s (pid %d): %s, %s bytes free; give " N4P_SHM_DIR
                    " more space (docker run --shm-size=...) or lower %s",
                    comm->cur_op != NULL ? comm->cur_op : "ncclCommInitRank",
                    (unsigned long long)bytes, what, (int)getpid(), why, avail, lower);
}

/* Reserve [off, off + n) of the segment open on fd and mapped at base. */
static ncclResult_t reserve_range(ncclComm_t comm, int fd, char *base, uint64_t off, uint64_t n,
                                  const char *what)
{
    int err = allocate(fd, off, n);
    if (err == EOPNOTSUPP) /* a /dev/shm that is not a tmpfs */
        err = populate(base + off, (size_t)n, true);
    if (err == 0 || err == EINVAL) /* EINVAL: no way to reserve; as before */
        return ncclSuccess;
    return shortage(comm, err, n, what,
                    "NCCL4PY_HOST_SLOT_BYTES and NCCL4PY_HOST_RING_BYTES");
}

ncclResult_t n4p_space_head(ncclComm_t comm, int fd, void *base, const n4p_seg_hdr *h)
{
    char what[64];
    snprintf(what, sizeof what, "a segment of %d ranks", h->nranks);
    return reserve_range(comm, fd, base, 0, h->off_rings, what);
}

ncclResult_t n4p_space_body(ncclComm_t comm, int fd, void *base, const n4p_seg_hdr *h)
{
    /* without MADV_POPULATE_WRITE the senders cannot reserve their rings */
    const uint64_t end = can_populate(base) ? h->off_data : h->total_bytes;
    char what[64];
    snprintf(what, sizeof what, "a segment of %d ranks", h->nranks);
    return reserve_range(comm, fd, base, h->off_rings, end - h->off_rings, what);
}

ncclResult_t n4p_space_ring(ncclComm_t comm, int peer)
{
    const size_t cap = comm->seg.ring_bytes;
    const char *ring = comm->seg.data +
                       ((size_t)comm->rank * (size_t)comm->nranks + (size_t)peer) * cap;
    int err = can_populate(comm->seg.base) ? populate(ring, cap, true) : 0;
    if (err != 0 && err != EINVAL) {
        char what[64];
        snprintf(what, sizeof what, "the ring to rank %d", peer);
        return shortage(comm, err, cap, what, "NCCL4PY_HOST_RING_BYTES");
    }
    comm->ring_ready[peer] = 1;
    return ncclSuccess;
}

int n4p_space_probe(const void *p, size_t n, bool write)
{
    int err = populate(p, n, write);
    return err == EINVAL ? 0 : err;
}
