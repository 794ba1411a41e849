/*
 * lowp_portable.c - the portable kernels of the 16- and 8-bit floats: the
 * template of lowp_kernels.h over lowp.h's branch-free conversions, one
 * element a step, for the build's generic target.  The compiler turns the
 * loops into vector code (SSE2 on x86-64, NEON on aarch64); every CPU runs
 * them, and they are the reference the other kernels are checked against.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* -O3 for the vectoriser's cost model (as reduce.c); without trapping math
 * GCC may compute both sides of the selects of lowp.h, which is what lets
 * it vectorise their loops.  Only whether floating-point exception flags
 * could be raised changes, which nothing reads; no result does. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-trapping-math")
#endif

#include <string.h>

#include "internal.h"
#include "lowp.h"

#define LK_PATH portable
#define LK_ATTR
#define LK_LANES 1
#define LK_V float
#define LK_LDF(p) (*(p))
#define LK_STF(p, v) (*(p) = (v))
#define LK_SET(x) (x)
#define LK_ADD(a, b) ((a) + (b))
#define LK_MUL(a, b) ((a) * (b))
#define LK_DIV(a, b) ((a) / (b))
#define LK_MAX(a, b) N4P_FMAX(a, b)
#define LK_MIN(a, b) N4P_FMIN(a, b)

static inline void store16(unsigned char *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

#define LK_TYPE f16
#define LK_ESZ 2
#define LK_LD(p) n4p_half_decode(n4p_load16(p))
#define LK_ST(p, v) store16((p), n4p_half_encode(v))
#define LK_DEC1(p) n4p_half_decode(n4p_load16(p))
#include "lowp_kernels.h"

#define LK_TYPE bf16
#define LK_ESZ 2
#define LK_LD(p) n4p_bf16_decode(n4p_load16(p))
#define LK_ST(p, v) store16((p), n4p_bf16_encode(v))
#define LK_DEC1(p) n4p_bf16_decode(n4p_load16(p))
#include "lowp_kernels.h"

#define LK_TYPE e4m3
#define LK_ESZ 1
#define LK_LD(p) n4p_e4m3_decode(*(p))
#define LK_ST(p, v) (*(p) = n4p_e4m3_encode(v))
#define LK_DEC1(p) n4p_e4m3_decode(*(p))
#include "lowp_kernels.h"

#define LK_TYPE e5m2
#define LK_ESZ 1
#define LK_LD(p) n4p_e5m2_decode(*(p))
#define LK_ST(p, v) (*(p) = n4p_e5m2_encode(v))
#define LK_DEC1(p) n4p_e5m2_decode(*(p))
#include "lowp_kernels.h"

const n4p_lowp_kernels n4p_lowp_portable[ncclNumTypes] = {
    [ncclFloat16] = LK_KERNELS(f16, portable),
    [ncclBfloat16] = LK_KERNELS(bf16, portable),
    [ncclFloat8e4m3] = LK_KERNELS(e4m3, portable),
    [ncclFloat8e5m2] = LK_KERNELS(e5m2, portable),
};
