/*
 * lowp_avx2.c - the kernels of the 16- and 8-bit floats for x86 CPUs with
 * AVX2 and F16C: the template of lowp_kernels.h, eight elements a step,
 * compiled for those instructions only (function attributes; the build's
 * target stays generic, and lowp_select.c takes these kernels only where
 * the CPU has both).
 *
 * They give the same bits as lowp.h's functions for every input:
 *   - a half is widened by vcvtph2ps and rounded by vcvtps2ph (to nearest
 *     even), after a NaN is given lowp.h's canonical payload (vcvtps2ph
 *     would keep the top of its own);
 *   - an e5m2 code is the high byte of a half, so vcvtph2ps widens it too,
 *     and rounding a float onto e5m2's grid first (round_to_grid) makes
 *     vcvtps2ph exact, its high byte the code;
 *   - an e4m3 code is a half with the same fields, 8 less in the exponent
 *     and no infinity or NaN: vcvtph2ps, times 256 (exact), with the NaN
 *     codes 0x7f / 0xff set to the canonical NaN first (only in blocks that
 *     hold one: a scan of the block is cheaper); and back the same way,
 *     from a float on e4m3's grid;
 *   - bfloat16 is the high half of a float, rounded by lowp.h's integer
 *     arithmetic eight lanes at a time.
 * AVX-512 BF16's vcvtneps2bf16 is not used: it flushes subnormal inputs and
 * results to zero, so it would change results.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <string.h>

#include "internal.h"
#include "lowp.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define LK_PATH avx2
#define LK_ATTR __attribute__((target("avx2,f16c")))
#define LK_LANES 8
#define LK_V __m256
#define LK_LDF(p) _mm256_loadu_ps(p)
#define LK_STF(p, v) _mm256_storeu_ps((p), (v))
#define LK_SET(x) _mm256_set1_ps(x)
#define LK_ADD(a, b) _mm256_add_ps((a), (b))
#define LK_MUL(a, b) _mm256_mul_ps((a), (b))
#define LK_DIV(a, b) _mm256_div_ps((a), (b))
#define LK_MAX(a, b) vmax((a), (b))
#define LK_MIN(a, b) vmin((a), (b))

#define VI(x) _mm256_set1_epi32((int)(x))
#define LOAD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define LOAD64(p) _mm_loadl_epi64((const __m128i *)(const void *)(p))

/* N4P_FMAX / N4P_FMIN: the earlier NaN, else a later NaN or the later
 * operand when it is not less (not greater), else the earlier one. */
LK_ATTR static inline __m256 vmax(__m256 a, __m256 b)
{
    __m256 t = _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_NLT_UQ));
    return _mm256_blendv_ps(t, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

LK_ATTR static inline __m256 vmin(__m256 a, __m256 b)
{
    __m256 t = _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_NGT_UQ));
    return _mm256_blendv_ps(t, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

#define SIGNS _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))
#define QNAN _mm256_castsi256_ps(VI(0x7fc00000))
#define F2BITS(e) (((e) + 127) << 23) /* the bits of the float 2^e */

/* The high byte of each of eight 16-bit lanes (stored as eight bytes), the
 * high halves of eight 32-bit ones (stored as eight 16-bit lanes). */
LK_ATTR static inline void store_high_bytes(unsigned char *p, __m128i h)
{
    const __m128i odd = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    _mm_storel_epi64((__m128i *)(void *)p, _mm_shuffle_epi8(h, odd));
}

LK_ATTR static inline void store_high_halves(unsigned char *p, __m256i u)
{
    const __m256i hi = _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1,
                                        2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(u, hi), 0x08);
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(v));
}

/*
 * |f| rounded to nearest even onto the grid of a format with M mantissa
 * bits whose smallest normal is 2^emin: adding 2^(e + 23 - M), for f's
 * exponent e (at least emin, at most emax), leaves exactly the bits the
 * format keeps, and subtracting it again is exact.  Above 2^(emax + 1) the
 * result is too large for the format; the caller maps it to its overflow.
 * This is the rounding of lowp.h's encoder, done by the float adder: the
 * same bits in the default floating-point environment (round to nearest),
 * which the reductions' own arithmetic assumes too.
 */
LK_ATTR static inline __m256 round_to_grid(__m256 a, int M, int emin, int emax)
{
    __m256i m = _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(a), VI(0x7f800000)),
                                 VI((23 - M) << 23));
    m = _mm256_min_epi32(_mm256_max_epi32(m, VI(F2BITS(emin + 23 - M))),
                         VI(F2BITS(emax + 1 + 23 - M)));
    const __m256 big = _mm256_castsi256_ps(m);
    return _mm256_sub_ps(_mm256_add_ps(a, big), big);
}

LK_ATTR static inline __m256 ld_f16(const unsigned char *p)
{
    return _mm256_cvtph_ps(LOAD128(p));
}

LK_ATTR static inline void st_f16(unsigned char *p, __m256 f)
{
    __m256 nan = _mm256_or_ps(_mm256_and_ps(f, SIGNS), QNAN);
    f = _mm256_blendv_ps(f, nan, _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}

LK_ATTR static inline __m256 ld_bf16(const unsigned char *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(LOAD128(p)), 16));
}

LK_ATTR static inline void st_bf16(unsigned char *p, __m256 f)
{
    /* a NaN first becomes the canonical one, which the rounding keeps */
    __m256 nan = _mm256_or_ps(_mm256_and_ps(f, SIGNS), QNAN);
    __m256i u = _mm256_castps_si256(_mm256_blendv_ps(f, nan, _mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), VI(1));
    store_high_halves(p, _mm256_add_epi32(_mm256_add_epi32(u, VI(0x7fff)), odd));
}

/* The e4m3 codes as halves: the sign to bit 15, exponent and mantissa to
 * bits 13..7. */
LK_ATTR static inline __m128i e4m3_halves(const unsigned char *p)
{
    return _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(LOAD64(p)), 7),
                         _mm_set1_epi16((short)0xbf80));
}

LK_ATTR static inline __m256 ld_e4m3(const unsigned char *p)
{
    __m128i h = e4m3_halves(p);
    /* the NaN codes would be +-480: make them the half NaN 0x7e00 */
    __m128i is_nan = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
                                     _mm_set1_epi16(0x3f80));
    h = _mm_xor_si128(h, _mm_and_si128(is_nan, _mm_set1_epi16(0x3f80 ^ 0x7e00)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

/* ld_e4m3 for codes none of which is NaN, and whether any of n codes is. */
LK_ATTR static inline __m256 ld_e4m3_plain(const unsigned char *p)
{
    return _mm256_mul_ps(_mm256_cvtph_ps(e4m3_halves(p)), _mm256_set1_ps(256.0f));
}

LK_ATTR static inline bool e4m3_nans(const unsigned char *p, size_t n)
{
    const __m256i low7 = _mm256_set1_epi8(0x7f);
    __m256i any = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        any = _mm256_or_si256(any, _mm256_cmpeq_epi8(_mm256_and_si256(v, low7), low7));
    }
    for (; i < n; i++)
        if ((p[i] & 0x7f) == 0x7f)
            return true;
    return !_mm256_testz_si256(any, any);
}

LK_ATTR static inline void st_e4m3(unsigned char *p, __m256 f)
{
    /* on the grid, beyond it (more than 464) and NaN made 480, the code of
     * NaN; times 2^-8 that is a half with e4m3's fields in bits 13..7, which
     * adding its magnitude once more moves next to the sign */
    const __m256 sign = _mm256_and_ps(f, SIGNS);
    __m256 r = _mm256_min_ps(round_to_grid(_mm256_andnot_ps(SIGNS, f), 3, -6, 8),
                             _mm256_set1_ps(480.0f));
    r = _mm256_mul_ps(_mm256_or_ps(r, sign), _mm256_set1_ps(1.0f / 256.0f));
    __m128i h = _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT);
    store_high_bytes(p, _mm_add_epi16(h, _mm_and_si128(h, _mm_set1_epi16(0x7fff))));
}

LK_ATTR static inline __m256 ld_e5m2(const unsigned char *p)
{
    return _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), LOAD64(p)));
}

LK_ATTR static inline void st_e5m2(unsigned char *p, __m256 f)
{
    /* on the grid (of halves, which e5m2 is the high byte of), overflowing
     * to infinity as a half; NaN made the canonical one */
    const __m256 sign = _mm256_and_ps(f, SIGNS);
    __m256 r = round_to_grid(_mm256_andnot_ps(SIGNS, f), 2, -14, 15);
    r = _mm256_blendv_ps(r, QNAN, _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    store_high_bytes(p, _mm256_cvtps_ph(_mm256_or_ps(r, sign), _MM_FROUND_TO_NEAREST_INT));
}

#define LK_TYPE f16
#define LK_ESZ 2
#define LK_LD(p) ld_f16(p)
#define LK_ST(p, v) st_f16((p), (v))
#define LK_DEC1(p) n4p_half_decode(n4p_load16(p))
#include "lowp_kernels.h"

#define LK_TYPE bf16
#define LK_ESZ 2
#define LK_LD(p) ld_bf16(p)
#define LK_ST(p, v) st_bf16((p), (v))
#define LK_DEC1(p) n4p_bf16_decode(n4p_load16(p))
#include "lowp_kernels.h"

#define LK_TYPE e4m3
#define LK_ESZ 1
#define LK_LD(p) ld_e4m3(p)
#define LK_ST(p, v) st_e4m3((p), (v))
#define LK_DEC1(p) n4p_e4m3_decode(*(p))
#define LK_SPECIAL(p, n) e4m3_nans((p), (n))
#define LK_LD_PLAIN(p) ld_e4m3_plain(p)
#include "lowp_kernels.h"

#define LK_TYPE e5m2
#define LK_ESZ 1
#define LK_LD(p) ld_e5m2(p)
#define LK_ST(p, v) st_e5m2((p), (v))
#define LK_DEC1(p) n4p_e5m2_decode(*(p))
#include "lowp_kernels.h"

const n4p_lowp_kernels n4p_lowp_avx2[ncclNumTypes] = {
    [ncclFloat16] = LK_KERNELS(f16, avx2),
    [ncclBfloat16] = LK_KERNELS(bf16, avx2),
    [ncclFloat8e4m3] = LK_KERNELS(e4m3, avx2),
    [ncclFloat8e5m2] = LK_KERNELS(e5m2, avx2),
};
#endif
