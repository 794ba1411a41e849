/*
 * lowp_avx512_fp8.h - the AVX-512 kernels' fp8 reductions through float32,
 * 64 codes a step: a part of lowp_avx512.c, included by it once, after its
 * vector helpers (vmax / vmin, to_half_odd, fp8_pack64, st64_n, pair) and
 * under its target attributes (LK_ATTR); not a header of its own.
 */
#ifndef N4P_HOST_LOWP_AVX512_FP8_H
#define N4P_HOST_LOWP_AVX512_FP8_H

/* ------------------------------------------- fp8 through float32
 *
 * Every other fp8 reduction (more than two sources; PreMulSum; an average
 * of more ranks) is the float32 reduction of the template, computed 64
 * codes a step with the accumulator in registers: the codes widened by
 * table (vpermt2b) to bfloat16, which is exact and the high half of the
 * float32, the float32 operations in rank order, and the result rounded to
 * odd onto the half grid and from there to nearest even onto the fp8 one,
 * as st_e4m3 / st_e5m2 do.  e4m3 values stay 2^-8 times their value for every op but
 * the product: their float32 sums, averages, maxima, minima and PreMulSum
 * terms are then exactly 2^-8 times the template's (no result of these ops
 * on e4m3 codes comes near float32's overflow or subnormal range, where a
 * power-of-two scale would change a rounding), which saves a
 * multiplication at each end; a product of many codes could, and is
 * computed on the values themselves. */
typedef struct {
    __m512 v[4];
} f64x;

/* e4m3 codes as bfloat16, the high half of a float32: of 2^-8 times their
 * value, as the half tables above (exact; the NaN codes the quiet NaN), the
 * sign added */
static const unsigned char e4m3_bf_hi[128] __attribute__((aligned(64))) = {
    0x00, 0x37, 0x37, 0x37, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38,
    0x38, 0x38, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39,
    0x39, 0x39, 0x39, 0x39, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a,
    0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b,
    0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c,
    0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3d, 0x3d, 0x3d, 0x3d,
    0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3e, 0x3e,
    0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
    0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f,
    0x3f, 0x7f
};
static const unsigned char e4m3_bf_lo[128] __attribute__((aligned(64))) = {
    0x00, 0x00, 0x80, 0xc0, 0x00, 0x20, 0x40, 0x60, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0,
    0xe0, 0xf0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0,
    0xc0, 0xd0, 0xe0, 0xf0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90,
    0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
    0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50,
    0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0x00, 0x10, 0x20, 0x30,
    0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0x00, 0x10,
    0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0,
    0xe0, 0xc0
};
/* e5m2 codes as bfloat16: their value (lowp.h's decoding: a NaN keeps its
 * payload, quieted), the sign added */
static const unsigned char e5m2_bf_hi[128] __attribute__((aligned(64))) = {
    0x00, 0x37, 0x38, 0x38, 0x38, 0x38, 0x38, 0x38, 0x39, 0x39, 0x39, 0x39, 0x39, 0x39,
    0x39, 0x39, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3a, 0x3b, 0x3b, 0x3b, 0x3b,
    0x3b, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3d, 0x3d,
    0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
    0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
    0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x42, 0x42, 0x42, 0x42,
    0x42, 0x42, 0x42, 0x42, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x44, 0x44,
    0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45,
    0x46, 0x46, 0x46, 0x46, 0x46, 0x46, 0x46, 0x46, 0x47, 0x47, 0x47, 0x47, 0x7f, 0x7f,
    0x7f, 0x7f
};
static const unsigned char e5m2_bf_lo[128] __attribute__((aligned(64))) = {
    0x00, 0x80, 0x00, 0x40, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0,
    0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60,
    0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20,
    0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
    0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0,
    0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60,
    0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20,
    0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0,
    0x00, 0x20, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x20, 0x40, 0x60, 0x80, 0xe0,
    0xc0, 0xe0
};
/* Widened through bfloat16 (below), float32 vector j of a step holds, in
 * its lane 4m + k, code 16m + 4j + k; narrowed, the float32 vectors' halves
 * are packed as for fp8_st64 (above), which puts code c at byte
 * fp8_bf_order[c]: vpermb with it gives the codes in order. */
static const unsigned char fp8_bf_order[64] __attribute__((aligned(64))) = {
    0x00, 0x01, 0x02, 0x03, 0x20, 0x21, 0x22, 0x23, 0x08, 0x09, 0x0a, 0x0b, 0x28, 0x29,
    0x2a, 0x2b, 0x04, 0x05, 0x06, 0x07, 0x24, 0x25, 0x26, 0x27, 0x0c, 0x0d, 0x0e, 0x0f,
    0x2c, 0x2d, 0x2e, 0x2f, 0x10, 0x11, 0x12, 0x13, 0x30, 0x31, 0x32, 0x33, 0x18, 0x19,
    0x1a, 0x1b, 0x38, 0x39, 0x3a, 0x3b, 0x14, 0x15, 0x16, 0x17, 0x34, 0x35, 0x36, 0x37,
    0x1c, 0x1d, 0x1e, 0x1f, 0x3c, 0x3d, 0x3e, 0x3f
};

LK_ATTR static inline f64x fp8_widen64(const unsigned char *p, size_t n, int type,
                                       const __m512i tab[4], bool scaled)
{
    /* the bfloat16's bytes by table; the float32's low half is zero */
    const __m512i c = n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(TAIL64(n), p);
    const __m512i z = _mm512_setzero_si512();
    __m512i hi = _mm512_ternarylogic_epi32(c, _mm512_set1_epi8((char)0x80),
                                           _mm512_permutex2var_epi8(tab[0], c, tab[1]), AND_OR);
    __m512i lo = _mm512_permutex2var_epi8(tab[2], c, tab[3]);
    __m512i wa = _mm512_unpacklo_epi8(lo, hi), wb = _mm512_unpackhi_epi8(lo, hi);
    f64x r = {{_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wa)),
               _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wa)),
               _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, wb)),
               _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, wb))}};
    if (type == ncclFloat8e4m3 && !scaled)
        for (int j = 0; j < 4; j++)
            r.v[j] = _mm512_mul_ps(r.v[j], _mm512_set1_ps(256.0f));
    return r;
}

/* to_half_odd for a float that is on the half grid wherever it is below the
 * half's smallest normal: there the half holds it exactly, elsewhere the
 * half keeps the float's top 11 significant bits, so the 13 bits below them
 * say whether rounding toward zero dropped anything (no conversion back) */
LK_ATTR static inline __m256i to_half_odd_grid(__m512 f)
{
    __m256i t = _mm512_cvtps_ph(f, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 inexact = _mm512_test_epi32_mask(_mm512_castps_si512(f), I32(0x1fff));
    return _mm256_mask_mov_epi16(t, inexact, _mm256_or_si256(t, Y16(1)));
}

/* grid: every value is a multiple of the fp8 type's smallest subnormal (its
 * half when scaled), which holds for the float32 sums, maxima and minima of
 * fp8 codes (a float32 rounding of a multiple of it is one too) and makes
 * the cheaper to_half_odd_grid exact; averages, products and PreMulSum
 * terms are not */
LK_ATTR static inline void fp8_narrow64(unsigned char *p, f64x x, size_t n, int type,
                                        bool scaled, bool grid)
{
    if (type == ncclFloat8e4m3 && !scaled)
        for (int j = 0; j < 4; j++)
            x.v[j] = _mm512_mul_ps(x.v[j], _mm512_set1_ps(1.0f / 256.0f));
    __m256i t[4];
    for (int j = 0; j < 4; j++)
        t[j] = grid ? to_half_odd_grid(x.v[j]) : to_half_odd(x.v[j]);
    __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(t[0]), t[1], 1);
    __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(t[2]), t[3], 1);
    h64 h = {_mm512_castsi512_ph(a), _mm512_castsi512_ph(b)};
    __m512i c = fp8_pack64(h, type);
    st64_n(p, _mm512_permutexvar_epi8(_mm512_load_si512(fp8_bf_order), c), n);
}

/* acc op x as the template's combine / first / last (lowp_kernels.h) */
LK_ATTR static inline __m512 many_op(__m512 acc, __m512 x, int op, __m512 s)
{
    switch (op) {
    case ncclSum:
    case ncclAvg:
        return _mm512_add_ps(acc, x);
    case ncclProd:
        return _mm512_mul_ps(acc, x);
    case ncclMax:
        return vmax(acc, x);
    case ncclMin:
        return vmin(acc, x);
    default:
        return _mm512_add_ps(acc, _mm512_mul_ps(s, x));
    }
}

LK_ATTR static inline void many_run(unsigned char *q, const void *const *srcs, int nsrc,
                                    size_t count, int op, int type, __m512 s, __m512 d)
{
    const unsigned char *hi = type == ncclFloat8e4m3 ? e4m3_bf_hi : e5m2_bf_hi;
    const unsigned char *lo = type == ncclFloat8e4m3 ? e4m3_bf_lo : e5m2_bf_lo;
    const __m512i tab[4] = {_mm512_load_si512(hi), _mm512_load_si512(hi + 64),
                            _mm512_load_si512(lo), _mm512_load_si512(lo + 64)};
    const bool scaled = op != ncclProd;
    for (size_t i = 0; i < count; i += 64) {
        const size_t n = count - i < 64 ? count - i : 64;
        f64x acc = fp8_widen64((const unsigned char *)srcs[0] + i, n, type, tab, scaled);
        if (op == N4P_OP_PREMUL)
            for (int j = 0; j < 4; j++)
                acc.v[j] = _mm512_mul_ps(s, acc.v[j]);
        for (int k = 1; k < nsrc; k++) {
            f64x x = fp8_widen64((const unsigned char *)srcs[k] + i, n, type, tab, scaled);
            for (int j = 0; j < 4; j++)
                acc.v[j] = many_op(acc.v[j], x.v[j], op, s);
        }
        if (op == ncclAvg)
            for (int j = 0; j < 4; j++)
                acc.v[j] = _mm512_div_ps(acc.v[j], d);
        fp8_narrow64(q + i, acc, n, type, scaled,
                     op == ncclSum || op == ncclMax || op == ncclMin);
    }
}

/* The reductions of fp8 codes: two sources in halves where pair() can,
 * everything else through float32.  One call per op, as in pair(). */
LK_ATTR static inline bool fp8_own(const n4p_redspec *rs, void *dst, const void *const *srcs,
                                   int nsrc, size_t count, int type)
{
    if (nsrc < 2)
        return false;
    if (nsrc == 2 && pair(rs, dst, srcs, count, type))
        return true;
    unsigned char *q = dst;
    const float d = (float)rs->nranks;
    const float s1 = type == ncclFloat8e4m3 ? n4p_e4m3_decode(rs->scalar[0])
                                            : n4p_e5m2_decode(rs->scalar[0]);
    const __m512 s = _mm512_set1_ps(s1), dv = _mm512_set1_ps(d);
    switch (rs->op) {
    case ncclSum:
        many_run(q, srcs, nsrc, count, ncclSum, type, s, dv);
        break;
    case ncclProd:
        many_run(q, srcs, nsrc, count, ncclProd, type, s, dv);
        break;
    case ncclMax:
        many_run(q, srcs, nsrc, count, ncclMax, type, s, dv);
        break;
    case ncclMin:
        many_run(q, srcs, nsrc, count, ncclMin, type, s, dv);
        break;
    case ncclAvg:
        many_run(q, srcs, nsrc, count, ncclAvg, type, s, dv);
        break;
    default:
        many_run(q, srcs, nsrc, count, N4P_OP_PREMUL, type, s, dv);
        break;
    }
    return true;
}

#endif
