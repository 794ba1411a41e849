/*
 * lowp_select.c - which kernels reduce the 16- and 8-bit floats, chosen
 * once per process, as copy.c chooses its copy loop.
 *
 *   - "avx512" (lowp_avx512.c) on x86-64 CPUs with AVX-512 F, BW, VL, DQ,
 *     VBMI, FP16 and BF16;
 *   - "avx2" (lowp_avx2.c) on x86 CPUs with AVX2 and F16C;
 *   - "portable" (lowp_portable.c) everywhere else.
 *
 * All give the same bits for every input, so the choice changes only the
 * speed; the variable exists to test and compare them.  It is read at the
 * first reduction of such a type (or nccl4pyHostConvert) and must be one
 * of "auto" (the default, also when unset or empty: the first of the list
 * the CPU has), "avx512", "avx2" or "portable", in any case, with or
 * without spaces around it.  A set names the most that may be taken: the
 * first of the list from it on that the CPU has (asking for avx512 on a
 * CPU with AVX2 only gives avx2).  Another value is reported once on
 * stderr and read as "auto".
 * NCCL_DEBUG=INFO names the kernels taken.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define KERNELS_VAR "NCCL4PY_HOST_KERNELS"

static const n4p_lowp_kernels *chosen = n4p_lowp_portable;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

/* Whether `v`, without the spaces around it, is `word` (any case). */
static bool is_word(const char *v, const char *word)
{
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(word);
    if (strncasecmp(v, word, n) != 0)
        return false;
    for (v += n; isspace((unsigned char)*v); v++)
        ;
    return *v == '\0';
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* AVX2 as copy.c asks for it (the compiler's runtime checks that the OS
 * saves the vector registers too), F16C from CPUID (which not every
 * compiler's __builtin_cpu_supports knows). */
static bool cpu_has_avx2_f16c(void)
{
    unsigned a, b, c, d;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

#if defined(__x86_64__)
/* AVX-512 (the runtime checks that the OS saves the mask and 512-bit
 * registers), with the half and bfloat16 instructions, from CPUID (leaf 7:
 * EDX bit 23 of subleaf 0, EAX bit 5 of subleaf 1), which not every
 * compiler's __builtin_cpu_supports knows; and only where the compiler
 * built the kernels (lowp_avx512.c). */
static bool cpu_has_avx512(void)
{
    unsigned a, b, c, d, a1, b1, c1, d1;
    __builtin_cpu_init();
    return n4p_lowp_avx512[ncclFloat16].reduce != NULL && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vbmi") &&
           cpu_has_avx2_f16c() &&
           __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23)) &&
           __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
}
#endif

/* The sets, best first; `level` is the first that may be taken. */
enum { SET_AVX512, SET_AVX2, SET_PORTABLE };
static const char *const set_names[] = {"avx512", "avx2", "portable"};

static bool cpu_has(int set)
{
    switch (set) {
#if defined(__x86_64__)
    case SET_AVX512:
        return cpu_has_avx512();
#endif
#if defined(__x86_64__) || defined(__i386__)
    case SET_AVX2:
        return cpu_has_avx2_f16c();
#endif
    case SET_PORTABLE:
        return true;
    default:
        return false;
    }
}

static const n4p_lowp_kernels *set_kernels(int set)
{
    switch (set) {
#if defined(__x86_64__)
    case SET_AVX512:
        return n4p_lowp_avx512;
#endif
#if defined(__x86_64__) || defined(__i386__)
    case SET_AVX2:
        return n4p_lowp_avx2;
#endif
    default:
        return n4p_lowp_portable;
    }
}

static void choose(void)
{
    const char *v = getenv(KERNELS_VAR);
    int level = SET_AVX512;
    if (v == NULL || is_word(v, ""))
        v = "auto";
    else if (!is_word(v, "auto")) {
        int s = 0;
        while (s <= SET_PORTABLE && !is_word(v, set_names[s]))
            s++;
        if (s <= SET_PORTABLE)
            level = s;
        else
            n4p_say("%s=%s is not auto, avx512, avx2 or portable; using auto", KERNELS_VAR, v);
    }
    int set = level;
    while (!cpu_has(set))
        set++;
    chosen = set_kernels(set);
    n4p_log(N4P_LOG_INFO, NULL, "16- and 8-bit float kernels: %s (%s=%s)", set_names[set],
            KERNELS_VAR, v);
}

const n4p_lowp_kernels *n4p_lowp_kernels_of(int dtype)
{
    if (dtype < 0 || dtype >= ncclNumTypes || n4p_lowp_portable[dtype].reduce == NULL)
        return NULL;
    pthread_once(&choose_once, choose);
    return &chosen[dtype];
}

/* The conversions of the reductions, for tests and tools: `count` codes of
 * a 16- or 8-bit float type to floats (toFloat != 0), or floats to codes,
 * with the kernels the reductions take.  The floats are an array of float
 * (aligned), the codes may lie at any address.  Returns 0, or -1 (and
 * converts nothing) for another type or a NULL pointer. */
N4P_EXPORT int nccl4pyHostConvert(int dtype, int toFloat, const void *in, void *out,
                                  size_t count);
N4P_EXPORT int nccl4pyHostConvert(int dtype, int toFloat, const void *in, void *out,
                                  size_t count)
{
    const n4p_lowp_kernels *k = n4p_lowp_kernels_of(dtype);
    if (k == NULL || (count > 0 && (in == NULL || out == NULL)))
        return -1;
    if (toFloat)
        k->decode(out, in, count);
    else
        k->encode(out, in, count);
    return 0;
}
