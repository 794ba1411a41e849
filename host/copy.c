/*
 * copy.c - copying a collective's output into the caller's buffer.
 *
 * A collective whose output is larger than the last-level cache can hold
 * for all ranks writes it with non-temporal (streaming) stores: the lines
 * go to memory without first being read into the cache, which saves a
 * third of the memory traffic of a copy and keeps the staging slots that
 * the ranks are about to read in the cache.  Smaller outputs use memcpy,
 * so that they stay in the cache for the caller.  Streaming stores are
 * weakly ordered; a streaming copy ends with a store fence, so everything
 * it wrote is visible before anything the caller stores afterwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

#define FALLBACK_LLC (8u << 20) /* when the cache size is not known */

static size_t llc_bytes(void)
{
    static atomic_size_t cached;
    size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == 0) {
        long s = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
        s = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (s <= 0)
            s = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        v = s > 0 ? (size_t)s : FALLBACK_LLC;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

bool n4p_streaming(ncclComm_t comm, size_t out_bytes)
{
    return HAVE_STREAM && out_bytes >= llc_bytes() / (size_t)comm->nranks;
}

void n4p_copy(void *dst, const void *src, size_t n, bool stream)
{
#if HAVE_STREAM
    if (stream && n >= 4096) {
        char *d = dst;
        const char *s = src;
        size_t head = (size_t)(-(uintptr_t)d & 15u);
        memcpy(d, s, head);
        d += head, s += head, n -= head;
        for (; n >= 64; d += 64, s += 64, n -= 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
            _mm_stream_si128((__m128i *)(void *)d, a);
            _mm_stream_si128((__m128i *)(void *)(d + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + 48), e);
        }
        memcpy(d, s, n);
        _mm_sfence();
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, n);
}
