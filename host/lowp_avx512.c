/*
 * lowp_avx512.c - the kernels of the 16- and 8-bit floats for x86 CPUs with
 * AVX-512 F/BW/VL/DQ/VBMI, AVX512-FP16 and AVX512-BF16: the template of
 * lowp_kernels.h, sixteen float32 elements a step, compiled for those
 * instructions only (function attributes; the build's target stays generic,
 * and lowp_select.c takes these kernels only where the CPU has them all; a
 * compiler without the half intrinsics builds an empty set).
 *
 * They give the same bits as lowp.h's functions and the other kernels for
 * every input.  Widening is exact:
 *   - a half is widened by vcvtph2ps;
 *   - an e5m2 code is the high byte of a half;
 *   - an e4m3 code is a half with the same fields in bits 13..7 (8 less in
 *     the exponent, so 2^-8 times the value, subnormals included), with the
 *     NaN codes 0x7f / 0xff made the half NaN 0x7e00 (a masked add);
 *   - bfloat16 is the high half of a float.
 * Rounding a float32 once to nearest even:
 *   - half: vcvtps2ph, after a NaN is given the canonical payload;
 *   - bfloat16: vcvtneps2bf16 where no lane is a subnormal or a NaN (it
 *     flushes subnormals to zero and keeps a NaN's payload), else lowp.h's
 *     integer rounding;
 *   - fp8: vcvtps2ph rounding toward zero, with the lowest bit set where
 *     that was inexact, is the float rounded to odd onto the half grid
 *     (for e4m3 the float is first scaled by 2^-8, exactly for every value
 *     that does not round to zero); that grid has at least 7 more bits than
 *     the fp8 one at every magnitude, so rounding it to nearest even onto
 *     the fp8 grid (integer arithmetic on the half's bits) rounds the float
 *     once.
 * Two sources (two ranks, or the bias of an all-reduce-with-bias) of sum,
 * prod, max, min and average (of two ranks) are reduced in halves, 32
 * lanes a step (64 for fp8), where that gives the bits of the float32
 * reduction (see "two sources, in halves" below for which and why);
 * everything else goes through float32.  Partial steps use masked loads
 * and stores.
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

#if defined(__x86_64__)
#include <immintrin.h>
#endif
/* the compiler's half intrinsics (GCC 12 and later declare them for the
 * target attributes below; older Clang only for -mavx512fp16): without
 * them the set is empty, and lowp_select.c never takes it */
#if defined(__x86_64__) &&                                                     \
    (defined(__AVX512FP16INTRIN_H_INCLUDED) || defined(__AVX512FP16INTRIN_H))

#define LK_PATH avx512
#define LK_ATTR                                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512fp16,"  \
                          "avx512bf16,avx2,f16c,fma")))
#define LK_LANES 16
#define LK_REGS 1 /* bfloat16 and half: 1.03x-1.3x at 3 and 4 sources in the cache */
#define LK_V __m512
#define LK_LDF(p) _mm512_loadu_ps(p)
#define LK_STF(p, v) _mm512_storeu_ps((p), (v))
#define LK_SET(x) _mm512_set1_ps(x)
#define LK_ADD(a, b) _mm512_add_ps((a), (b))
#define LK_MUL(a, b) _mm512_mul_ps((a), (b))
#define LK_DIV(a, b) _mm512_div_ps((a), (b))
#define LK_MAX(a, b) vmax((a), (b))
#define LK_MIN(a, b) vmin((a), (b))

#define W16(x) _mm512_set1_epi16((short)(x))
#define Y16(x) _mm256_set1_epi16((short)(x))
#define I32(x) _mm512_set1_epi32((int)(x))
#define TAIL16(n) ((__mmask16)((1u << (n)) - 1u)) /* n < 16 lanes */
#define TAIL32(n) ((__mmask32)((1ull << (n)) - 1u)) /* n < 32 lanes */
#define TAIL64(n) ((__mmask64)((1ull << (n)) - 1u)) /* n < 64 lanes */
/* vpternlog truth tables over (a, b, c): a & b | c, and a | b & c */
#define AND_OR 0xea
#define OR_AND 0xf8

/* N4P_FMAX / N4P_FMIN: the earlier NaN, else a later NaN or the later
 * operand when it is not less (not greater), else the earlier one. */
LK_ATTR static inline __m512 vmax(__m512 a, __m512 b)
{
    __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_NLT_UQ), a, b);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), t, a);
}

LK_ATTR static inline __m512 vmin(__m512 a, __m512 b)
{
    __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_NGT_UQ), a, b);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), t, a);
}

/* The same on 32 halves. */
LK_ATTR static inline __m512h hmax(__m512h a, __m512h b)
{
    __m512h t = _mm512_mask_blend_ph(_mm512_cmp_ph_mask(b, a, _CMP_NLT_UQ), a, b);
    return _mm512_mask_blend_ph(_mm512_cmp_ph_mask(a, a, _CMP_UNORD_Q), t, a);
}

LK_ATTR static inline __m512h hmin(__m512h a, __m512h b)
{
    __m512h t = _mm512_mask_blend_ph(_mm512_cmp_ph_mask(b, a, _CMP_NGT_UQ), a, b);
    return _mm512_mask_blend_ph(_mm512_cmp_ph_mask(a, a, _CMP_UNORD_Q), t, a);
}

/* ---------------------------------------------------------------- loads
 * Sixteen codes at p (n of them, the rest zero, for the masked forms). */
LK_ATTR static inline __m256i ld16_n(const unsigned char *p, size_t n)
{
    return n >= 16 ? _mm256_loadu_si256((const __m256i *)(const void *)p)
                   : _mm256_maskz_loadu_epi16(TAIL16(n), p);
}

LK_ATTR static inline __m128i ld8_n(const unsigned char *p, size_t n)
{
    return n >= 16 ? _mm_loadu_si128((const __m128i *)(const void *)p)
                   : _mm_maskz_loadu_epi8(TAIL16(n), p);
}

LK_ATTR static inline void st16_n(unsigned char *p, __m256i v, size_t n)
{
    if (n >= 16)
        _mm256_storeu_si256((__m256i *)(void *)p, v);
    else
        _mm256_mask_storeu_epi16(p, TAIL16(n), v);
}

LK_ATTR static inline void st8_n(unsigned char *p, __m128i v, size_t n)
{
    if (n >= 16)
        _mm_storeu_si128((__m128i *)(void *)p, v);
    else
        _mm_mask_storeu_epi8(p, TAIL16(n), v);
}

/* ------------------------------------------------------- the conversions */

/* e4m3 codes (sign-extended to 16 bits) as halves of 2^-8 times their
 * value: the sign to bit 15, exponent and mantissa to bits 13..7; the NaN
 * codes, which would be +-1.875, made +-0x7e00 (0x3f80 + 0x3e80). */
LK_ATTR static inline __m256i e4m3_h16(__m128i b)
{
    __m256i x = _mm256_cvtepi8_epi16(b);
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(x, 7), Y16(0xbf80));
    __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(x, Y16(0x7f)), Y16(0x7f));
    return _mm256_mask_add_epi16(h, nan, h, Y16(0x3e80));
}

/* the e4m3 codes of halves of 2^-8 times a value: below +-480 (+-0x3f80)
 * the rounding is the code; above, and NaN, the NaN code 0x7f */
LK_ATTR static inline __m512i h32_e4m3(__m512i h)
{
    __m512i m = _mm512_and_si512(h, W16(0x7fff));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(m, 7), W16(1));
    __m512i r = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(m, W16(0x3f)), lsb), 7);
    r = _mm512_min_epu16(r, W16(0x7f));
    return _mm512_ternarylogic_epi32(_mm512_srli_epi16(h, 8), W16(0x80), r, AND_OR);
}

LK_ATTR static inline __m256i h16_e4m3(__m256i h)
{
    __m256i m = _mm256_and_si256(h, Y16(0x7fff));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(m, 7), Y16(1));
    __m256i r = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(m, Y16(0x3f)), lsb), 7);
    r = _mm256_min_epu16(r, Y16(0x7f));
    return _mm256_ternarylogic_epi32(_mm256_srli_epi16(h, 8), Y16(0x80), r, AND_OR);
}

/* the e5m2 codes of halves: the high byte rounded, which overflows to
 * infinity (0x7c) as it should; a NaN the canonical 0x7e */
LK_ATTR static inline __m512i h32_e5m2(__m512i h)
{
    __m512i m = _mm512_and_si512(h, W16(0x7fff));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(m, 8), W16(1));
    __m512i r = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(m, W16(0x7f)), lsb), 8);
    r = _mm512_mask_mov_epi16(r, _mm512_cmpgt_epu16_mask(m, W16(0x7c00)), W16(0x7e));
    return _mm512_ternarylogic_epi32(_mm512_srli_epi16(h, 8), W16(0x80), r, AND_OR);
}

LK_ATTR static inline __m256i h16_e5m2(__m256i h)
{
    __m256i m = _mm256_and_si256(h, Y16(0x7fff));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(m, 8), Y16(1));
    __m256i r = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(m, Y16(0x7f)), lsb), 8);
    r = _mm256_mask_mov_epi16(r, _mm256_cmpgt_epu16_mask(m, Y16(0x7c00)), Y16(0x7e));
    return _mm256_ternarylogic_epi32(_mm256_srli_epi16(h, 8), Y16(0x80), r, AND_OR);
}

/* f rounded to odd onto the half grid: toward zero, the lowest bit set
 * where that dropped anything (a NaN too, which stays a NaN) */
LK_ATTR static inline __m256i to_half_odd(__m512 f)
{
    __m256i t = _mm512_cvtps_ph(f, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 inexact = _mm512_cmp_ps_mask(_mm512_cvtph_ps(t), f, _CMP_NEQ_UQ);
    return _mm256_mask_mov_epi16(t, inexact, _mm256_or_si256(t, Y16(1)));
}

#define SIGNS _mm512_castsi512_ps(I32(0x80000000u))
#define QNAN _mm512_castsi512_ps(I32(0x7fc00000))

/* ------------------------------------- float32 steps: n of sixteen codes */

LK_ATTR static inline __m512 ld_f16(const unsigned char *p, size_t n)
{
    return _mm512_cvtph_ps(ld16_n(p, n));
}

LK_ATTR static inline void st_f16(unsigned char *p, __m512 f, size_t n)
{
    /* a NaN first becomes the canonical one, which vcvtps2ph keeps */
    __m512 nan = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(f), _mm512_castps_si512(SIGNS), _mm512_castps_si512(QNAN), AND_OR));
    f = _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), nan);
    st16_n(p, _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), n);
}

LK_ATTR static inline __m512 ld_bf16(const unsigned char *p, size_t n)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(ld16_n(p, n)), 16));
}

LK_ATTR static inline void st_bf16(unsigned char *p, __m512 f, size_t n)
{
    /* NaN, subnormal: lowp.h's integer rounding, the canonical NaN */
    const __mmask16 odd = _mm512_fpclass_ps_mask(f, 0x01 | 0x20 | 0x80);
    __m256i r = (__m256i)_mm512_cvtneps_pbh(f);
    if (odd) {
        __m512i u = _mm512_castps_si512(f);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), I32(1));
        __m512i v = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, I32(0x7fff)), lsb), 16);
        __m512i nan = _mm512_ternarylogic_epi32(_mm512_srli_epi32(u, 16), I32(0x8000),
                                                I32(0x7fc0), AND_OR);
        v = _mm512_mask_mov_epi32(v, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), nan);
        r = _mm256_mask_mov_epi16(r, odd, _mm512_cvtepi32_epi16(v));
    }
    st16_n(p, r, n);
}

LK_ATTR static inline __m512 ld_e4m3(const unsigned char *p, size_t n)
{
    return _mm512_mul_ps(_mm512_cvtph_ps(e4m3_h16(ld8_n(p, n))), _mm512_set1_ps(256.0f));
}

LK_ATTR static inline void st_e4m3(unsigned char *p, __m512 f, size_t n)
{
    /* scaled by 2^-8: exact down to 2^-118, and smaller values round to
     * zero either way */
    __m256i t = to_half_odd(_mm512_mul_ps(f, _mm512_set1_ps(1.0f / 256.0f)));
    st8_n(p, _mm256_cvtepi16_epi8(h16_e4m3(t)), n);
}

LK_ATTR static inline __m512 ld_e5m2(const unsigned char *p, size_t n)
{
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(ld8_n(p, n)), 8));
}

LK_ATTR static inline void st_e5m2(unsigned char *p, __m512 f, size_t n)
{
    st8_n(p, _mm256_cvtepi16_epi8(h16_e5m2(to_half_odd(f))), n);
}

/* --------------------------------------------- two sources, in halves
 *
 * Where the float32 reduction of two sources rounds once, computing it in
 * halves gives the same bits when the half operation is exact or rounds
 * to nearest with at least 2p + 2 bits for the p bits of the result (the
 * second rounding then changes nothing), with no overflow or underflow in
 * between that the float32 one would not have:
 *   - half: sum, prod, max, min (vaddph / vmulph round the exact result
 *     once, as the float32 result is rounded: exactly, or with 24 >= 2*11+2
 *     bits);
 *   - e4m3 (on halves of 2^-8 times the value, which keeps every sum and
 *     product in range, subnormals included): sum, prod, max, min and the
 *     average of two ranks (a/2 + b/2, halving exact);
 *   - e5m2 (on halves of the value; a sum that overflows the half
 *     overflows e5m2 too): the same.
 * host/test_dtypes.py and tests/lowp_worker.py check every pair of fp8
 * codes and every half against the other kernels, bit for bit.  PreMulSum,
 * bfloat16 and other averages go through float32. */

/* 32 halves */
LK_ATTR static inline __m512h f16_ld32(const unsigned char *p, size_t n)
{
    return _mm512_castsi512_ph(n >= 32 ? _mm512_loadu_si512(p)
                                       : _mm512_maskz_loadu_epi16(TAIL32(n), p));
}

LK_ATTR static inline void f16_st32(unsigned char *p, __m512h x, size_t n)
{
    __m512i h = _mm512_castph_si512(x);
    __m512i nan = _mm512_ternarylogic_epi32(h, W16(0x8000), W16(0x7e00), AND_OR);
    h = _mm512_mask_mov_epi16(h, _mm512_cmp_ph_mask(x, x, _CMP_UNORD_Q), nan);
    if (n >= 32)
        _mm512_storeu_si512(p, h);
    else
        _mm512_mask_storeu_epi16(p, TAIL32(n), h);
}

/*
 * 64 fp8 codes as two vectors of halves, the bytes of each 128-bit lane
 * interleaved with a low byte (vpunpcklbw / vpunpckhbw: codes 0-7 of each
 * lane in the first, 8-15 in the second); vpackuswb of the two vectors'
 * codes puts them back in order.  An e4m3 code's high and low bytes (of
 * the half of 2^-8 times its value) come from 128-byte tables indexed by
 * its low seven bits (vpermt2b), the sign added.
 */
static const unsigned char e4m3_hi[128] __attribute__((aligned(64))) = {
    0x00, 0x00, 0x01, 0x01, 0x02, 0x02, 0x03, 0x03, 0x04, 0x04, 0x05, 0x05, 0x06, 0x06,
    0x07, 0x07, 0x08, 0x08, 0x09, 0x09, 0x0a, 0x0a, 0x0b, 0x0b, 0x0c, 0x0c, 0x0d, 0x0d,
    0x0e, 0x0e, 0x0f, 0x0f, 0x10, 0x10, 0x11, 0x11, 0x12, 0x12, 0x13, 0x13, 0x14, 0x14,
    0x15, 0x15, 0x16, 0x16, 0x17, 0x17, 0x18, 0x18, 0x19, 0x19, 0x1a, 0x1a, 0x1b, 0x1b,
    0x1c, 0x1c, 0x1d, 0x1d, 0x1e, 0x1e, 0x1f, 0x1f, 0x20, 0x20, 0x21, 0x21, 0x22, 0x22,
    0x23, 0x23, 0x24, 0x24, 0x25, 0x25, 0x26, 0x26, 0x27, 0x27, 0x28, 0x28, 0x29, 0x29,
    0x2a, 0x2a, 0x2b, 0x2b, 0x2c, 0x2c, 0x2d, 0x2d, 0x2e, 0x2e, 0x2f, 0x2f, 0x30, 0x30,
    0x31, 0x31, 0x32, 0x32, 0x33, 0x33, 0x34, 0x34, 0x35, 0x35, 0x36, 0x36, 0x37, 0x37,
    0x38, 0x38, 0x39, 0x39, 0x3a, 0x3a, 0x3b, 0x3b, 0x3c, 0x3c, 0x3d, 0x3d, 0x3e, 0x3e,
    0x3f, 0x7e
};
static const unsigned char e4m3_lo[128] __attribute__((aligned(64))) = {
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80,
    0x00, 0x00
};

typedef struct {
    __m512h a, b;
} h64;

LK_ATTR static inline h64 fp8_ld64(const unsigned char *p, size_t n, int type,
                                   const __m512i tab[4])
{
    const __m512i c = n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(TAIL64(n), p);
    __m512i hi = c, lo = _mm512_setzero_si512();
    if (type == ncclFloat8e4m3) {
        hi = _mm512_ternarylogic_epi32(c, _mm512_set1_epi8((char)0x80),
                                       _mm512_permutex2var_epi8(tab[0], c, tab[1]), AND_OR);
        lo = _mm512_permutex2var_epi8(tab[2], c, tab[3]);
    }
    h64 r = {_mm512_castsi512_ph(_mm512_unpacklo_epi8(lo, hi)),
             _mm512_castsi512_ph(_mm512_unpackhi_epi8(lo, hi))};
    return r;
}

LK_ATTR static inline __m512i fp8_pack64(h64 x, int type)
{
    __m512i a = _mm512_castph_si512(x.a), b = _mm512_castph_si512(x.b);
    return type == ncclFloat8e4m3 ? _mm512_packus_epi16(h32_e4m3(a), h32_e4m3(b))
                                  : _mm512_packus_epi16(h32_e5m2(a), h32_e5m2(b));
}

LK_ATTR static inline void st64_n(unsigned char *p, __m512i c, size_t n)
{
    if (n >= 64)
        _mm512_storeu_si512(p, c);
    else
        _mm512_mask_storeu_epi8(p, TAIL64(n), c);
}

LK_ATTR static inline void fp8_st64(unsigned char *p, h64 x, size_t n, int type)
{
    st64_n(p, fp8_pack64(x, type), n);
}

LK_ATTR static inline __m512h pair_op(__m512h a, __m512h b, int op, int type)
{
    const __m512h half = _mm512_set1_ph((_Float16)0.5f);
    switch (op) {
    case ncclSum:
        return _mm512_add_ph(a, b);
    case ncclProd:
        /* e4m3: the value times 2^-8 times the other */
        if (type == ncclFloat8e4m3)
            a = _mm512_mul_ph(a, _mm512_set1_ph((_Float16)256.0f));
        return _mm512_mul_ph(a, b);
    case ncclMax:
        return hmax(a, b);
    case ncclMin:
        return hmin(a, b);
    default: /* ncclAvg of two ranks */
        return _mm512_add_ph(_mm512_mul_ph(a, half), _mm512_mul_ph(b, half));
    }
}

LK_ATTR static inline void pair_run(unsigned char *q, const unsigned char *p0,
                                    const unsigned char *p1, size_t count, int op, int type)
{
    size_t i = 0;
    if (type == ncclFloat16) {
        for (; i + 32 <= count; i += 32)
            f16_st32(q + 2 * i, pair_op(f16_ld32(p0 + 2 * i, 32), f16_ld32(p1 + 2 * i, 32), op, type),
                     32);
        if (i < count) {
            const size_t n = count - i;
            f16_st32(q + 2 * i, pair_op(f16_ld32(p0 + 2 * i, n), f16_ld32(p1 + 2 * i, n), op, type),
                     n);
        }
        return;
    }
    const __m512i tab[4] = {_mm512_load_si512(e4m3_hi), _mm512_load_si512(e4m3_hi + 64),
                            _mm512_load_si512(e4m3_lo), _mm512_load_si512(e4m3_lo + 64)};
    for (; i + 64 <= count; i += 64) {
        h64 x = fp8_ld64(p0 + i, 64, type, tab), y = fp8_ld64(p1 + i, 64, type, tab);
        h64 r = {pair_op(x.a, y.a, op, type), pair_op(x.b, y.b, op, type)};
        fp8_st64(q + i, r, 64, type);
    }
    if (i < count) {
        const size_t n = count - i;
        h64 x = fp8_ld64(p0 + i, n, type, tab), y = fp8_ld64(p1 + i, n, type, tab);
        h64 r = {pair_op(x.a, y.a, op, type), pair_op(x.b, y.b, op, type)};
        fp8_st64(q + i, r, n, type);
    }
}

/* Whether two sources of `type` were reduced in halves (else: float32).
 * Each case passes pair_run its op as a constant, so that every op gets a
 * loop of its own, with no switch inside it. */
LK_ATTR static inline bool pair(const n4p_redspec *rs, void *dst, const void *const *srcs,
                                size_t count, int type)
{
    unsigned char *q = dst;
    const unsigned char *p0 = srcs[0], *p1 = srcs[1];
    switch (rs->op) {
    case ncclSum:
        pair_run(q, p0, p1, count, ncclSum, type);
        return true;
    case ncclProd:
        pair_run(q, p0, p1, count, ncclProd, type);
        return true;
    case ncclMax:
        pair_run(q, p0, p1, count, ncclMax, type);
        return true;
    case ncclMin:
        pair_run(q, p0, p1, count, ncclMin, type);
        return true;
    case ncclAvg:
        if (type == ncclFloat16 || rs->nranks != 2)
            return false;
        pair_run(q, p0, p1, count, ncclAvg, type);
        return true;
    default:
        return false;
    }
}

#define LK_TYPE f16
#define LK_ESZ 2
#define LK_LD(p) ld_f16((p), 16)
#define LK_ST(p, v) st_f16((p), (v), 16)
#define LK_LD_N(p, n) ld_f16((p), (n))
#define LK_ST_N(p, v, n) st_f16((p), (v), (n))
#define LK_DEC1(p) n4p_half_decode(n4p_load16(p))
#define LK_OWN(rs, q, srcs, nsrc, n, s, d) ((nsrc) == 2 && pair((rs), (q), (srcs), (n), ncclFloat16))
#include "lowp_kernels.h"

#define LK_TYPE bf16
#define LK_ESZ 2
#define LK_LD(p) ld_bf16((p), 16)
#define LK_ST(p, v) st_bf16((p), (v), 16)
#define LK_LD_N(p, n) ld_bf16((p), (n))
#define LK_ST_N(p, v, n) st_bf16((p), (v), (n))
#define LK_DEC1(p) n4p_bf16_decode(n4p_load16(p))
#include "lowp_kernels.h"

/* more than two fp8 sources, PreMulSum, other averages: fp8_own(), on the
 * template's float32 operations (combine_avx512, ...) */
#include "lowp_avx512_fp8.h"

#define LK_TYPE e4m3
#define LK_ESZ 1
#define LK_LD(p) ld_e4m3((p), 16)
#define LK_ST(p, v) st_e4m3((p), (v), 16)
#define LK_LD_N(p, n) ld_e4m3((p), (n))
#define LK_ST_N(p, v, n) st_e4m3((p), (v), (n))
#define LK_DEC1(p) n4p_e4m3_decode(*(p))
#define LK_OWN(rs, q, srcs, nsrc, n, s, d) \
    fp8_own((rs), (q), (srcs), (nsrc), (n), ncclFloat8e4m3, (s), (d))
#include "lowp_kernels.h"

#define LK_TYPE e5m2
#define LK_ESZ 1
#define LK_LD(p) ld_e5m2((p), 16)
#define LK_ST(p, v) st_e5m2((p), (v), 16)
#define LK_LD_N(p, n) ld_e5m2((p), (n))
#define LK_ST_N(p, v, n) st_e5m2((p), (v), (n))
#define LK_DEC1(p) n4p_e5m2_decode(*(p))
#define LK_OWN(rs, q, srcs, nsrc, n, s, d) \
    fp8_own((rs), (q), (srcs), (nsrc), (n), ncclFloat8e5m2, (s), (d))
#include "lowp_kernels.h"

const n4p_lowp_kernels n4p_lowp_avx512[ncclNumTypes] = {
    [ncclFloat16] = LK_KERNELS(f16, avx512),
    [ncclBfloat16] = LK_KERNELS(bf16, avx512),
    [ncclFloat8e4m3] = LK_KERNELS(e4m3, avx512),
    [ncclFloat8e5m2] = LK_KERNELS(e5m2, avx512),
};
#else
const n4p_lowp_kernels n4p_lowp_avx512[ncclNumTypes] = {{NULL, NULL, NULL}};
#endif
