/*
 * lowp.h - the 16- and 8-bit floats: conversions to and from float32.
 *
 * Half, bfloat16 and the two fp8 formats are reduced in float32 and rounded
 * back once, with round-to-nearest-even.  The encoders follow the results of
 * ml_dtypes (float16 / bfloat16 / float8_e4m3fn / float8_e5m2):
 *
 *   - float16, bfloat16, e5m2 have infinities: overflow rounds to +-inf.
 *   - e4m3 is the "fn" variant: no infinity, largest finite 448, NaN is
 *     0x7f / 0xff.  Values that round beyond 448 (|x| > 464) and infinities
 *     become NaN (no saturation), as ml_dtypes does.
 *   - NaN keeps its sign; the payload is the canonical quiet NaN.
 *   - Decoding keeps a NaN's sign and payload, and sets its quiet bit;
 *     bfloat16 decodes to the float with its bits as the high half, as
 *     they are (the first arithmetic on a signalling NaN quiets it).
 *
 * These are the one definition of the conversions.  Each is branch-free
 * (every case is computed and the right one selected), so that a loop
 * calling them compiles to vector code for any target: they are the
 * portable kernels' conversions (lowp_portable.c), and the AVX2/F16C
 * kernels (lowp_avx2.c) compute the same bits.
 *
 * The generic encoder handles every IEEE-like format with E exponent and M
 * mantissa bits: a normal result re-biases the float32 bit pattern and
 * rounds the integer; a subnormal one is rounded by adding a power of two
 * whose unit in the last place is the format's smallest subnormal, so that
 * the float addition rounds (to nearest even) and no libm function is
 * needed.
 */
#ifndef N4P_HOST_LOWP_H
#define N4P_HOST_LOWP_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t n4p_fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float n4p_bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A 16-bit code at any address (the kernels' scalar loads). */
static inline uint16_t n4p_load16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Powers of two as floats, built from their bit patterns (exact). */
static inline float n4p_pow2f(int e)
{
    return n4p_bitsf((uint32_t)(e + 127) << 23);
}

/*
 * Decode an IEEE-like code with E exponent bits, M mantissa bits and bias
 * 2^(E-1)-1.  `fn` selects the e4m3fn convention (no infinity, the all-ones
 * code is NaN).
 */
static inline float n4p_decode_small(uint32_t code, int E, int M, bool fn)
{
    const int B = (1 << (E - 1)) - 1;
    const uint32_t ones = (1u << (E + M)) - 1u; /* exponent and mantissa all set */
    const uint32_t sign = ((code >> (E + M)) & 1u) << 31;
    const uint32_t em = code & ones;
    const uint32_t exp = em >> M;
    const uint32_t man = em & ((1u << M) - 1u);
    /* normal: the fields moved into place, the exponent re-biased */
    uint32_t out = sign | ((em << (23 - M)) + ((uint32_t)(127 - B) << 23));
    /* subnormal: man units of the smallest subnormal (exact in float) */
    float sub = (float)(int32_t)man * n4p_pow2f(1 - B - M);
    out = exp == 0 ? (sign | n4p_fbits(sub)) : out;
    if (fn) {
        out = em == ones ? (sign | 0x7fc00000u) : out;
    } else {
        uint32_t special = sign | 0x7f800000u | (man << (23 - M)) | (man != 0 ? 0x00400000u : 0u);
        out = exp == (1u << E) - 1u ? special : out;
    }
    return n4p_bitsf(out);
}

/*
 * Encode a float into an IEEE-like format.  `max_code` is the largest finite
 * magnitude code, `ovf_code` what overflow produces (inf, or NaN for e4m3fn),
 * `nan_code` the canonical NaN and `inf_code` what an input infinity becomes.
 */
static inline uint32_t n4p_encode_small(float f, int E, int M, int32_t max_code,
                                        uint32_t ovf_code, uint32_t nan_code,
                                        uint32_t inf_code)
{
    const int B = (1 << (E - 1)) - 1;
    const int shift = 23 - M;
    const uint32_t u = n4p_fbits(f);
    const uint32_t sign = (u >> 31) << (E + M);
    const int32_t a = (int32_t)(u & 0x7fffffffu);
    /* normal in the target format: re-bias, round the dropped bits */
    int32_t v = a - ((127 - B) << 23);
    v += (1 << (shift - 1)) - 1 + ((v >> shift) & 1);
    int32_t code_n = v >> shift;
    uint32_t normal = code_n > max_code ? ovf_code : (uint32_t)code_n;
    /* subnormal (or zero): the value in units of the smallest subnormal,
     * rounded to nearest even by the addition; a value that rounds up to
     * 1 << M is exactly the smallest normal code */
    const float magic = n4p_pow2f(23 - (B - 1 + M));
    uint32_t sub = n4p_fbits(n4p_bitsf((uint32_t)a) + magic) - n4p_fbits(magic);
    uint32_t code = a >= ((128 - B) << 23) ? normal : sub;
    /* an infinity or a NaN overflows the normal path: only a code other
     * than the overflow's needs its own case */
    if (inf_code != ovf_code)
        code = a == 0x7f800000 ? inf_code : code;
    if (nan_code != ovf_code)
        code = a > 0x7f800000 ? nan_code : code;
    return sign | code;
}

static inline float n4p_half_decode(uint16_t h)
{
    return n4p_decode_small(h, 5, 10, false);
}

static inline uint16_t n4p_half_encode(float f)
{
    return (uint16_t)n4p_encode_small(f, 5, 10, 0x7bff, 0x7c00u, 0x7e00u, 0x7c00u);
}

static inline float n4p_bf16_decode(uint16_t h)
{
    return n4p_bitsf((uint32_t)h << 16);
}

static inline uint16_t n4p_bf16_encode(float f)
{
    const uint32_t u = n4p_fbits(f);
    /* Same exponent range as float: round the low 16 bits away; a carry
     * into the exponent (up to infinity) is the correct result. */
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)((int32_t)(u & 0x7fffffffu) > 0x7f800000 ? nan : r);
}

static inline float n4p_e4m3_decode(uint8_t v)
{
    return n4p_decode_small(v, 4, 3, true);
}

static inline uint8_t n4p_e4m3_encode(float f)
{
    return (uint8_t)n4p_encode_small(f, 4, 3, 0x7e, 0x7fu, 0x7fu, 0x7fu);
}

static inline float n4p_e5m2_decode(uint8_t v)
{
    return n4p_decode_small(v, 5, 2, false);
}

static inline uint8_t n4p_e5m2_encode(float f)
{
    return (uint8_t)n4p_encode_small(f, 5, 2, 0x7b, 0x7cu, 0x7eu, 0x7cu);
}

#endif
