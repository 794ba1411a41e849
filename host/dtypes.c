/*
 * dtypes.c - element sizes, names and conversions of the 16- and 8-bit floats.
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
 *
 * The generic encoder handles every IEEE-like format with E exponent and M
 * mantissa bits by re-biasing the float32 bit pattern and rounding the
 * integer; subnormal results are rounded with the float "magic number" trick
 * so that no libm function is needed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <string.h>

#include "internal.h"

/* Sizes and names from the table of data types (src/dtypes.def). */
static const size_t dtype_sizes[ncclNumTypes] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) [value] = size,
#include "dtypes.def"
};

static const char *const dtype_names[ncclNumTypes] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) [value] = #array_name,
#include "dtypes.def"
};

size_t n4p_dtype_size(int dtype)
{
    if (dtype < 0 || dtype >= ncclNumTypes)
        return 0;
    return dtype_sizes[dtype];
}

const char *n4p_dtype_name(int dtype)
{
    if (dtype < 0 || dtype >= ncclNumTypes)
        return "invalid";
    return dtype_names[dtype];
}

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Powers of two as floats, built from their bit patterns (exact). */
static inline float pow2f(int e)
{
    return bitsf((uint32_t)(e + 127) << 23);
}

/* Round a non-negative float below 2^23 to an integer, ties to even. */
static inline uint32_t rint_small(float v)
{
    volatile float magic = 8388608.0f; /* keeps the addition un-folded */
    float r = (v + magic) - magic;
    return (uint32_t)r;
}

/*
 * Decode an IEEE-like code with E exponent bits, M mantissa bits and bias B.
 * `fn` selects the e4m3fn convention (no infinity, all-ones code is NaN).
 */
static inline float decode_small(uint32_t code, int E, int M, bool fn)
{
    const int B = (1 << (E - 1)) - 1;
    uint32_t sign = (code >> (E + M)) & 1u;
    uint32_t exp = (code >> M) & ((1u << E) - 1u);
    uint32_t man = code & ((1u << M) - 1u);
    uint32_t out;
    if (fn) {
        if (exp == (1u << E) - 1u && man == (1u << M) - 1u)
            return bitsf((sign << 31) | 0x7fc00000u);
    } else if (exp == (1u << E) - 1u) {
        out = (sign << 31) | 0x7f800000u | (man << (23 - M));
        if (man != 0)
            out |= 0x00400000u;
        return bitsf(out);
    }
    if (exp == 0) {
        float v = (float)man * pow2f(1 - B - M);
        return sign ? -v : v;
    }
    out = (sign << 31) | ((exp + 127u - (uint32_t)B) << 23) | (man << (23 - M));
    return bitsf(out);
}

/*
 * Encode a float into an IEEE-like format.  `max_code` is the largest finite
 * magnitude code, `ovf_code` what overflow produces (inf, or NaN for e4m3fn),
 * `nan_code` the canonical NaN and `inf_code` what an input infinity becomes.
 */
static inline uint32_t encode_small(float f, int E, int M, uint32_t max_code,
                                    uint32_t ovf_code, uint32_t nan_code,
                                    uint32_t inf_code)
{
    const int B = (1 << (E - 1)) - 1;
    uint32_t u = fbits(f);
    uint32_t sign = (u >> 31) << (E + M);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | nan_code;
    if (a == 0x7f800000u)
        return sign | inf_code;
    if ((a >> 23) >= (uint32_t)(128 - B)) {
        const int shift = 23 - M;
        uint32_t v = a - ((uint32_t)(127 - B) << 23);
        v += (1u << (shift - 1)) - 1u + ((v >> shift) & 1u);
        uint32_t code = v >> shift;
        if (code > max_code)
            return sign | ovf_code;
        return sign | code;
    }
    /* Subnormal (or zero) in the target format: the code is the value in
     * units of the smallest subnormal, rounded to nearest even.  A value that
     * rounds up to 1 << M is exactly the smallest normal code. */
    float scaled = bitsf(a) * pow2f(B - 1 + M);
    return sign | rint_small(scaled);
}

float n4p_half_to_float(uint16_t h)
{
    return decode_small(h, 5, 10, false);
}

uint16_t n4p_float_to_half(float f)
{
    return (uint16_t)encode_small(f, 5, 10, 0x7bffu, 0x7c00u, 0x7e00u, 0x7c00u);
}

float n4p_bf16_to_float(uint16_t h)
{
    return bitsf((uint32_t)h << 16);
}

uint16_t n4p_float_to_bf16(float f)
{
    uint32_t u = fbits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    /* Same exponent range as float: round the low 16 bits away; a carry
     * into the exponent (up to infinity) is the correct result. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float n4p_e4m3_to_float(uint8_t v)
{
    return decode_small(v, 4, 3, true);
}

uint8_t n4p_float_to_e4m3(float f)
{
    return (uint8_t)encode_small(f, 4, 3, 0x7eu, 0x7fu, 0x7fu, 0x7fu);
}

float n4p_e5m2_to_float(uint8_t v)
{
    return decode_small(v, 5, 2, false);
}

uint8_t n4p_float_to_e5m2(float f)
{
    return (uint8_t)encode_small(f, 5, 2, 0x7bu, 0x7cu, 0x7eu, 0x7cu);
}
