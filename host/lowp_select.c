/*
 * lowp_select.c - which kernels reduce the 16- and 8-bit floats, chosen
 * once per process, as copy.c chooses its copy loop.
 *
 *   - "avx2" (lowp_avx2.c) on x86 CPUs with AVX2 and F16C;
 *   - "portable" (lowp_portable.c) everywhere else, and wherever
 *     NCCL4PY_HOST_KERNELS=portable asks for it.
 *
 * Both give the same bits for every input, so the choice changes only the
 * speed; the variable exists to test and compare the two.  It is read at
 * the first reduction of such a type (or nccl4pyHostConvert) and must be
 * "auto" (the default, also when unset or empty) or "portable", in any
 * case, with or without spaces around it; another value is reported once
 * on stderr and read as "auto".
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

static void choose(void)
{
    const char *v = getenv(KERNELS_VAR);
    bool portable = false;
    if (v == NULL || is_word(v, ""))
        v = "auto";
    else if (is_word(v, "portable"))
        portable = true;
    else if (!is_word(v, "auto"))
        n4p_say("%s=%s is not auto or portable; using auto", KERNELS_VAR, v);
    const char *name = "portable";
#if defined(__x86_64__) || defined(__i386__)
    if (!portable && cpu_has_avx2_f16c()) {
        chosen = n4p_lowp_avx2;
        name = "avx2";
    }
#else
    (void)portable;
#endif
    n4p_log(N4P_LOG_INFO, NULL, "16- and 8-bit float kernels: %s (%s=%s)", name, KERNELS_VAR,
            v);
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
