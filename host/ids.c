/*
 * ids.c - unique ids: made at random, derived, recognised.
 *
 * A unique id is 128 bytes: an 8-byte tag ("n4phost1"), 16 random bytes that
 * name the segment (/dev/shm/nccl4py-<32 hex digits>, shm.c), 32 random
 * "secret" bytes that never appear in a name (communicators created by split
 * and shrink derive their ids from them, so their names are just as
 * unguessable), and random filler.  An id from ncclCommGetUniqueId has the
 * tag "n4phostg" instead (comm_make.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom */
#endif
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "transport.h"

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

bool n4p_id_is_grow(const ncclUniqueId *id)
{
    return memcmp(id->internal, N4P_ID_GROW_TAG, N4P_ID_TAG_LEN) == 0;
}

bool n4p_id_valid(const ncclUniqueId *id)
{
    return memcmp(id->internal, N4P_ID_TAG, N4P_ID_TAG_LEN) == 0 || n4p_id_is_grow(id);
}
