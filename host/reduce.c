/*
 * reduce.c - element-wise reduction kernels.
 *
 * n4p_reduce(dst, srcs[0..nsrc-1]) computes, for every element i,
 *     dst[i] = ((pre(s0[i]) op pre(s1[i])) op pre(s2[i])) op ...
 * always in source (= rank) order, so every rank that reduces the same
 * element obtains the same bits, whichever algorithm it runs.
 *
 * Semantics chosen for the operators:
 *   - integers wrap (two's complement) for sum, prod and PreMulSum;
 *   - ncclAvg on integers is the (wrapped) sum divided by nranks with C
 *     division (truncation toward zero); on floating types it is the sum
 *     divided by nranks;
 *   - max/min on floating types propagate NaN, and between +0 and -0 pick
 *     the later rank's value (as NumPy does);
 *   - PreMulSum multiplies each input by the scalar, then sums;
 *   - half, bfloat16 and fp8 are widened to float32, reduced there, and
 *     rounded to nearest even once at the end.
 *
 * Sources are the staging slots of the shared segment or, for a rank's own
 * input, the caller's buffer, which may have any alignment: a block of a
 * source that is not aligned for its type is copied to an aligned stack
 * block first.  The kernels accumulate into an aligned stack block and
 * copy it to `dst` (n4p_copy), so `dst` may have any alignment too.  The
 * inner loops are plain `restrict` loops that GCC vectorises.  The kernels
 * of the 16- and 8-bit floats (lowp_kernels.h) load and store at any
 * address and convert as they load and store.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
/* GCC vectorises at -O2 only loops whose trip count needs no epilogue;
 * these kernels are worth the -O3 cost model (clang vectorises anyway). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <string.h>

#include "internal.h"

#define BLK 1024

/* Elements [base, base + m) of a source, at an address aligned for elements
 * of esz bytes: in place when it is, else copied to `buf`. */
static const void *aligned_block(const void *src, size_t base, size_t m, size_t esz,
                                 void *buf)
{
    const char *p = (const char *)src + base * esz;
    if (((uintptr_t)p & (esz - 1)) == 0)
        return p;
    n4p_copy(buf, p, m * esz, false);
    return buf;
}

/* Integer arithmetic through the unsigned type: wraps without UB. */
#define IADD(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define IMUL(T, U, a, b) ((T)((U)(a) * (U)(b)))
#define FADD(T, U, a, b) ((a) + (b))
#define FMUL(T, U, a, b) ((a) * (b))
#define IMAX(a, b) ((b) > (a) ? (b) : (a))
#define IMIN(a, b) ((b) < (a) ? (b) : (a))

#define DEFINE_COMBINE(NAME, T, U, ADD, MUL, MAX, MIN)                          \
    static void NAME##_first(T *restrict acc, const T *restrict src, size_t m, \
                             int op, T s)                                      \
    {                                                                          \
        if (op == N4P_OP_PREMUL) {                                             \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = MUL(T, U, s, src[i]);                                 \
        } else {                                                               \
            n4p_copy(acc, src, m * sizeof(T), false);                          \
        }                                                                      \
    }                                                                          \
    static void NAME##_combine(T *restrict acc, const T *restrict src,         \
                               size_t m, int op, T s)                          \
    {                                                                          \
        switch (op) {                                                          \
        case ncclSum:                                                          \
        case ncclAvg:                                                          \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = ADD(T, U, acc[i], src[i]);                            \
            break;                                                             \
        case ncclProd:                                                         \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = MUL(T, U, acc[i], src[i]);                            \
            break;                                                             \
        case ncclMax:                                                          \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = MAX(acc[i], src[i]);                                  \
            break;                                                             \
        case ncclMin:                                                          \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = MIN(acc[i], src[i]);                                  \
            break;                                                             \
        default: /* PreMulSum */                                               \
            for (size_t i = 0; i < m; i++)                                     \
                acc[i] = ADD(T, U, acc[i], MUL(T, U, s, src[i]));              \
            break;                                                             \
        }                                                                      \
    }                                                                          \
    static void NAME##_avg(T *restrict acc, size_t m, int n)                   \
    {                                                                          \
        const T d = (T)n;                                                      \
        for (size_t i = 0; i < m; i++)                                         \
            acc[i] = (T)(acc[i] / d);                                          \
    }                                                                          \
    static void NAME##_reduce(const n4p_redspec *rs, void *dst,                \
                              const void *const *srcs, int nsrc, size_t count) \
    {                                                                          \
        _Alignas(64) T acc[BLK];                                               \
        _Alignas(64) T tmp[BLK];                                               \
        T s;                                                                   \
        memcpy(&s, rs->scalar, sizeof s);                                      \
        for (size_t base = 0; base < count; base += BLK) {                     \
            size_t m = count - base < BLK ? count - base : BLK;                \
            NAME##_first(acc, aligned_block(srcs[0], base, m, sizeof(T), tmp), \
                         m, rs->op, s);                                        \
            for (int k = 1; k < nsrc; k++)                                     \
                NAME##_combine(acc,                                            \
                               aligned_block(srcs[k], base, m, sizeof(T), tmp), \
                               m, rs->op, s);                                  \
            if (rs->op == ncclAvg)                                             \
                NAME##_avg(acc, m, rs->nranks);                                \
            n4p_copy((char *)dst + base * sizeof(T), acc, m * sizeof(T), false); \
        }                                                                      \
    }

DEFINE_COMBINE(i8, int8_t, uint8_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(u8, uint8_t, uint8_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(i32, int32_t, uint32_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(u32, uint32_t, uint32_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(i64, int64_t, uint64_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(u64, uint64_t, uint64_t, IADD, IMUL, IMAX, IMIN)
DEFINE_COMBINE(f32, float, float, FADD, FMUL, N4P_FMAX, N4P_FMIN)
DEFINE_COMBINE(f64, double, double, FADD, FMUL, N4P_FMAX, N4P_FMIN)

/* The 16- and 8-bit floats: widened to float32 (lowp_kernels.h). */
#define DEFINE_WIDENED(NAME)                                                   \
    static void NAME##_reduce(const n4p_redspec *rs, void *dst,                \
                              const void *const *srcs, int nsrc, size_t count) \
    {                                                                          \
        n4p_lowp_kernels_of(rs->dtype)->reduce(rs, dst, srcs, nsrc, count);    \
    }
DEFINE_WIDENED(f16)
DEFINE_WIDENED(bf16)
DEFINE_WIDENED(e4m3)
DEFINE_WIDENED(e5m2)

/* Each data type's kernel, as the table (src/dtypes.def) names it. */
void n4p_reduce(const n4p_redspec *rs, void *dst, const void *const *srcs,
                int nsrc, size_t count)
{
    if (count == 0 || nsrc <= 0)
        return;
    switch (rs->dtype) {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) \
    case value:                                                            \
        kernel##_reduce(rs, dst, srcs, nsrc, count);                       \
        break;
#include "dtypes.def"
    default:
        break;
    }
}

/* dst[i] += bias[i] (RCCL's ncclAllReduceWithBias); both may be unaligned.
 * Every kernel writes an element of `dst` after reading that element of
 * every source, so `dst` may be a source too. */
void n4p_add_bias(int dtype, void *dst, const void *bias, size_t count)
{
    n4p_redspec rs = {.dtype = dtype, .op = ncclSum, .nranks = 1};
    const void *srcs[2] = {dst, bias};
    n4p_reduce(&rs, dst, srcs, 2, count);
}
