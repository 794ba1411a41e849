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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <immintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

#define FALLBACK_LLC (8u << 20) /* when the cache size is not known */
#define MAX_CACHE_INDEX 16

/* A cache size as sysfs writes it ("32768K", "1M", "512"), or 0. */
static size_t parse_cache_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    unsigned shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift > 0)
        end++;
    if ((*end != '\n' && *end != '\0') || v == 0 || v > (SIZE_MAX >> 30))
        return 0;
    return (size_t)v << shift;
}

/* The first line of a small text file, or "" when it cannot be read. */
static void read_line(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    if (fgets(buf, (int)size, f) == NULL)
        buf[0] = '\0';
    fclose(f);
}

/* The size of the highest cache level of CPU 0, as the kernel describes it
 * (sysfs), or 0.  The kernel's description is preferred to sysconf(), which
 * glibc derives from CPUID: inside virtual machines CPUID often describes
 * the host's caches (256 MiB of L3 for a VM that has 32 MiB). */
static size_t sysfs_llc(void)
{
    size_t best = 0;
    long best_level = 0;
    for (int i = 0; i < MAX_CACHE_INDEX; i++) {
        char path[96], line[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        read_line(path, line, sizeof line);
        if (line[0] == '\0')
            break;
        long level = strtol(line, NULL, 10);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        read_line(path, line, sizeof line);
        if (strncmp(line, "Instruction", 11) == 0 || level < best_level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        read_line(path, line, sizeof line);
        size_t v = parse_cache_size(line);
        if (v > 0 && (level > best_level || v > best))
            best = v, best_level = level;
    }
    return best;
}

static size_t llc_bytes(void)
{
    static atomic_size_t cached;
    size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == 0) {
        v = sysfs_llc();
        long s = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
        if (v == 0) {
            s = sysconf(_SC_LEVEL3_CACHE_SIZE);
            if (s <= 0)
                s = sysconf(_SC_LEVEL2_CACHE_SIZE);
        }
#endif
        if (v == 0)
            v = s > 0 ? (size_t)s : FALLBACK_LLC;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

bool n4p_streaming(ncclComm_t comm, size_t out_bytes)
{
    return HAVE_STREAM && out_bytes >= llc_bytes() / (size_t)comm->nranks;
}

#if HAVE_STREAM
/* Below this many bytes, memcpy. */
#define VECTOR_MIN 256

/* 64 bytes at a time: unaligned loads, stores aligned on the destination,
 * streaming (non-temporal) or not. */
static void copy_sse2(char *d, const char *s, size_t n, bool stream)
{
    size_t head = (size_t)(-(uintptr_t)d & 15u);
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; d += 64, s += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
        if (stream) {
            _mm_stream_si128((__m128i *)(void *)d, a);
            _mm_stream_si128((__m128i *)(void *)(d + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + 48), e);
        } else {
            _mm_store_si128((__m128i *)(void *)d, a);
            _mm_store_si128((__m128i *)(void *)(d + 16), b);
            _mm_store_si128((__m128i *)(void *)(d + 32), c);
            _mm_store_si128((__m128i *)(void *)(d + 48), e);
        }
    }
    memcpy(d, s, n);
    if (stream)
        _mm_sfence();
}

/* The same, 128 bytes at a time, for CPUs with AVX2 (cached stores). */
__attribute__((target("avx2"))) static void copy_avx2(char *d, const char *s, size_t n)
{
    size_t head = (size_t)(-(uintptr_t)d & 31u);
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 128; d += 128, s += 128, n -= 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(s + 96));
        _mm256_store_si256((__m256i *)(void *)d, a);
        _mm256_store_si256((__m256i *)(void *)(d + 32), b);
        _mm256_store_si256((__m256i *)(void *)(d + 64), c);
        _mm256_store_si256((__m256i *)(void *)(d + 96), e);
    }
    memcpy(d, s, n);
}

static bool have_avx2(void)
{
    static atomic_int cached; /* 0 unknown, 1 no, 2 yes */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 2 : 1;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 2;
}
#endif

/* Whether a copy from src to dst is slow with the CPU's string copy (`rep
 * movsb`, which memcpy and the kernel's process_vm_readv use): the
 * destination a few bytes after the source modulo 4 KiB (16 and 24 bytes
 * were slow on the machine of bench/README.md, 32-56 not; the test takes
 * 1-63). */
bool n4p_slow_distance(uint64_t dst, uint64_t src)
{
    uint64_t d = (dst - src) & 4095u;
    return d > 0 && d < 64;
}

/* Copies of a collective's data whose destination lies a few bytes after
 * the source modulo 4 KiB use their own loop rather than memcpy: glibc
 * copies from a few KiB up to about the L2 size with `rep movsb`, which
 * some CPUs (AMD Zen 3, for one) run at a tenth of its speed or less at
 * such a distance, as when a page-aligned staging slot is copied into a
 * NumPy array (whose data starts 16 bytes into its allocation).  The
 * loop's speed does not depend on the alignment.  At any other distance
 * memcpy is as fast or faster: on an Intel Xeon with two copies running at
 * once, 32 MiB took 2.2-2.7 ms by memcpy against 2.6-2.8 by the loop, whose
 * stores read every line before writing it, where `rep movsb` writes whole
 * lines (a 2-rank 64 MiB all-gather: 7.5-8.3 ms against 8.1-8.3). */
void n4p_copy(void *dst, const void *src, size_t n, bool stream)
{
#if HAVE_STREAM
    if (n >= VECTOR_MIN) {
        if (stream && n >= 4096)
            copy_sse2(dst, src, n, true);
        else if (!n4p_slow_distance((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src))
            memcpy(dst, src, n);
        else if (have_avx2())
            copy_avx2(dst, src, n);
        else
            copy_sse2(dst, src, n, false);
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, n);
}
