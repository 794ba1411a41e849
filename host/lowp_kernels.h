/*
 * lowp_kernels.h - the kernels of one 16- or 8-bit float type, for one set
 * of loops: a template, included once per type by lowp_portable.c and
 * lowp_avx2.c.
 *
 * The reduction widens every source to float32 as it loads it, reduces in
 * float32 in rank order and rounds the result once as it stores it: the
 * conversions are inlined into the loops, which run LK_LANES elements a
 * step.  Two sources (two ranks, or an all-reduce-with-bias's addition)
 * take one pass and no accumulator; more go through a float32 block of
 * BLK elements kept in the cache.  A block of `dst` is written in the last
 * pass over the block, element by element after its sources are read, so
 * `dst` may be one of the sources at the same index (in place) and must
 * not otherwise overlap them, as in NCCL.  A set that defines LK_REGS keeps
 * the accumulator of more than two sources in a register instead, one step
 * over every source at a time (faster where the widening is cheap and the
 * loads of many streams are; the portable loops vectorise only the block
 * form).
 *
 * The including file defines, for its set of loops:
 *   LK_PATH, LK_ATTR    the suffix of the functions' names, their attributes
 *   LK_LANES, LK_V      elements per step, and their float32 vector type
 *   LK_REGS             (optional) the accumulator of more sources in registers
 *   LK_LDF(p), LK_STF(p, v)   load / store LK_LANES floats (unaligned)
 *   LK_SET(x), LK_ADD, LK_MUL, LK_DIV, LK_MAX, LK_MIN   vector arithmetic,
 *                       with the semantics of the float kernels (internal.h)
 * and, for the type:
 *   LK_TYPE, LK_ESZ     the type's name (f16, bf16, e4m3, e5m2), its size
 *   LK_LD(p), LK_ST(p, v)  load and widen / round and store LK_LANES
 *                       elements at any address
 *   LK_DEC1(p)          widen one element (the PreMulSum scalar)
 * and optionally, for a type whose widening is cheaper without its special
 * codes (e4m3's NaN):
 *   LK_SPECIAL(p, n)    whether any of the n codes at p is one
 *   LK_LD_PLAIN(p)      LK_LD for codes that are not
 * for partial steps without copies:
 *   LK_LD_N(p, n), LK_ST_N(p, v, n)   LK_LD / LK_ST of the first n < LK_LANES
 *                       elements (the other lanes loaded as zero)
 * and for reductions with loops of its own:
 *   LK_OWN(rs, dst, srcs, nsrc, count, s, d)   reduces srcs[0..nsrc) into
 *                       dst and is true, or is false and does nothing (s, d:
 *                       the PreMulSum scalar and the divisor of ncclAvg, as
 *                       vectors, for the set's combine / first / last)
 * The type's macros are undefined at the end.
 *
 * Defines LK_KERNELS(LK_TYPE, LK_PATH): the type's n4p_lowp_kernels entry;
 * at the first inclusion, the set's float32 operations combine_<LK_PATH>,
 * first_<LK_PATH> and last_<LK_PATH>.
 */

#define LK_CAT3_(a, b, c) a##_##b##_##c
#define LK_CAT3(a, b, c) LK_CAT3_(a, b, c)
#define LK_FN(what) LK_CAT3(what, LK_TYPE, LK_PATH)
#define LK_CAT2_(a, b) a##_##b
#define LK_CAT2(a, b) LK_CAT2_(a, b)
#define LK_OPF(what) LK_CAT2(what, LK_PATH) /* the set's, not the type's */
#define LK_INLINE LK_ATTR static inline __attribute__((always_inline))

#ifndef LK_KERNELS
#define LK_KERNELS(type, path)                                                  \
    {                                                                           \
        LK_CAT3(decode, type, path), LK_CAT3(encode, type, path),               \
            LK_CAT3(reduce, type, path)                                         \
    }
#endif

#ifndef BLK
#define BLK 1024 /* elements of a block, a multiple of every LK_LANES */
#endif

/* A last step of n < LK_LANES elements: masked, or through zero-filled
 * copies. */
LK_INLINE LK_V LK_FN(load_tail)(const unsigned char *p, size_t n)
{
#ifdef LK_LD_N
    return LK_LD_N(p, n);
#else
    unsigned char b[LK_LANES * LK_ESZ] = {0};
    memcpy(b, p, n * LK_ESZ);
    return LK_LD(b);
#endif
}

LK_INLINE void LK_FN(store_tail)(unsigned char *p, LK_V v, size_t n)
{
#ifdef LK_ST_N
    LK_ST_N(p, v, n);
#else
    unsigned char b[LK_LANES * LK_ESZ];
    LK_ST(b, v);
    memcpy(p, b, n * LK_ESZ);
#endif
}

LK_ATTR static void LK_FN(decode)(float *out, const void *in, size_t n)
{
    const unsigned char *p = in;
    size_t i = 0;
    for (; i + LK_LANES <= n; i += LK_LANES)
        LK_STF(out + i, LK_LD(p + i * LK_ESZ));
    if (i < n) {
        float f[LK_LANES];
        LK_STF(f, LK_FN(load_tail)(p + i * LK_ESZ, n - i));
        memcpy(out + i, f, (n - i) * sizeof(float));
    }
}

LK_ATTR static void LK_FN(encode)(void *out, const float *in, size_t n)
{
    unsigned char *p = out;
    size_t i = 0;
    for (; i + LK_LANES <= n; i += LK_LANES)
        LK_ST(p + i * LK_ESZ, LK_LDF(in + i));
    if (i < n) {
        float f[LK_LANES] = {0};
        memcpy(f, in + i, (n - i) * sizeof(float));
        LK_FN(store_tail)(p + i * LK_ESZ, LK_LDF(f), n - i);
    }
}

/* The float32 operations, the same for every type: defined once per set
 * (at its first inclusion), so that a set's own loops (LK_OWN) compute what
 * these loops do by calling them. */
#ifndef LK_OPS_DEFINED
#define LK_OPS_DEFINED

/* acc op x, for an op known when inlined; PreMulSum adds s * x */
LK_INLINE LK_V LK_OPF(combine)(LK_V acc, LK_V x, int op, LK_V s)
{
    switch (op) {
    case ncclSum:
    case ncclAvg:
        return LK_ADD(acc, x);
    case ncclProd:
        return LK_MUL(acc, x);
    case ncclMax:
        return LK_MAX(acc, x);
    case ncclMin:
        return LK_MIN(acc, x);
    default:
        return LK_ADD(acc, LK_MUL(s, x));
    }
}

/* The first source as it enters the reduction, the result as it leaves. */
LK_INLINE LK_V LK_OPF(first)(LK_V x, int op, LK_V s)
{
    return op == N4P_OP_PREMUL ? LK_MUL(s, x) : x;
}

LK_INLINE LK_V LK_OPF(last)(LK_V x, int op, LK_V d)
{
    return op == ncclAvg ? LK_DIV(x, d) : x;
}
#endif

/* the widening of a block of sources, plain when none holds a special code
 * (one widening for a type without a plain one) */
#ifdef LK_LD_PLAIN
#define LK_LOAD(p) (plain ? LK_LD_PLAIN(p) : LK_LD(p))
#else
#define LK_LOAD(p) ((void)plain, LK_LD(p))
#endif

/* Elements [base, base + m) of the reduction (m at most BLK). */
LK_INLINE void LK_FN(block)(unsigned char *dst, const void *const *srcs, int nsrc,
                            size_t base, size_t m, int op, LK_V s, LK_V d, float *acc,
                            bool plain)
{
    const size_t mv = m - m % LK_LANES; /* whole steps */
    const unsigned char *p0 = (const unsigned char *)srcs[0] + base * LK_ESZ;
    unsigned char *q = dst + base * LK_ESZ;
    if (nsrc == 1) {
        for (size_t i = 0; i < mv; i += LK_LANES) {
            LK_V x = LK_OPF(first)(LK_LOAD(p0 + i * LK_ESZ), op, s);
            LK_ST(q + i * LK_ESZ, LK_OPF(last)(x, op, d));
        }
    } else {
        const unsigned char *p1 = (const unsigned char *)srcs[1] + base * LK_ESZ;
        if (nsrc == 2) {
            for (size_t i = 0; i < mv; i += LK_LANES) {
                LK_V x = LK_OPF(first)(LK_LOAD(p0 + i * LK_ESZ), op, s);
                x = LK_OPF(combine)(x, LK_LOAD(p1 + i * LK_ESZ), op, s);
                LK_ST(q + i * LK_ESZ, LK_OPF(last)(x, op, d));
            }
        } else {
#ifdef LK_REGS
            (void)acc;
            for (size_t i = 0; i < mv; i += LK_LANES) {
                LK_V x = LK_OPF(first)(LK_LOAD(p0 + i * LK_ESZ), op, s);
                x = LK_OPF(combine)(x, LK_LOAD(p1 + i * LK_ESZ), op, s);
                for (int k = 2; k < nsrc; k++)
                    x = LK_OPF(combine)(
                        x, LK_LOAD((const unsigned char *)srcs[k] + (base + i) * LK_ESZ), op, s);
                LK_ST(q + i * LK_ESZ, LK_OPF(last)(x, op, d));
            }
#else
            for (size_t i = 0; i < mv; i += LK_LANES) {
                LK_V x = LK_OPF(first)(LK_LOAD(p0 + i * LK_ESZ), op, s);
                LK_STF(acc + i, LK_OPF(combine)(x, LK_LOAD(p1 + i * LK_ESZ), op, s));
            }
            for (int k = 2; k < nsrc - 1; k++) {
                const unsigned char *pk = (const unsigned char *)srcs[k] + base * LK_ESZ;
                for (size_t i = 0; i < mv; i += LK_LANES)
                    LK_STF(acc + i,
                           LK_OPF(combine)(LK_LDF(acc + i), LK_LOAD(pk + i * LK_ESZ), op, s));
            }
            const unsigned char *pl =
                (const unsigned char *)srcs[nsrc - 1] + base * LK_ESZ;
            for (size_t i = 0; i < mv; i += LK_LANES) {
                LK_V x = LK_OPF(combine)(LK_LDF(acc + i), LK_LOAD(pl + i * LK_ESZ), op, s);
                LK_ST(q + i * LK_ESZ, LK_OPF(last)(x, op, d));
            }
#endif
        }
    }
    if (mv < m) {
        const size_t off = (base + mv) * LK_ESZ, n = m - mv;
        LK_V x = LK_OPF(first)(LK_FN(load_tail)((const unsigned char *)srcs[0] + off, n),
                              op, s);
        for (int k = 1; k < nsrc; k++)
            x = LK_OPF(combine)(
                x, LK_FN(load_tail)((const unsigned char *)srcs[k] + off, n), op, s);
        LK_FN(store_tail)(dst + off, LK_OPF(last)(x, op, d), n);
    }
}

LK_INLINE void LK_FN(run)(unsigned char *dst, const void *const *srcs, int nsrc,
                          size_t count, int op, LK_V s, LK_V d)
{
    _Alignas(64) float acc[BLK];
    for (size_t base = 0; base < count; base += BLK) {
        const size_t m = count - base < BLK ? count - base : BLK;
#ifdef LK_SPECIAL
        bool special = false;
        for (int k = 0; k < nsrc && !special; k++)
            special = LK_SPECIAL((const unsigned char *)srcs[k] + base * LK_ESZ, m);
        if (!special) {
            LK_FN(block)(dst, srcs, nsrc, base, m, op, s, d, acc, true);
            continue;
        }
#endif
        LK_FN(block)(dst, srcs, nsrc, base, m, op, s, d, acc, false);
    }
}

/* One call per op, so that each op's loops are compiled on their own. */
LK_ATTR static void LK_FN(reduce)(const n4p_redspec *rs, void *dst, const void *const *srcs,
                                  int nsrc, size_t count)
{
    const LK_V s = LK_SET(LK_DEC1(rs->scalar));
    const LK_V d = LK_SET((float)rs->nranks);
#ifdef LK_OWN
    if (LK_OWN(rs, dst, srcs, nsrc, count, s, d))
        return;
#endif
    unsigned char *q = dst;
    switch (rs->op) {
    case ncclSum:
        LK_FN(run)(q, srcs, nsrc, count, ncclSum, s, d);
        break;
    case ncclProd:
        LK_FN(run)(q, srcs, nsrc, count, ncclProd, s, d);
        break;
    case ncclMax:
        LK_FN(run)(q, srcs, nsrc, count, ncclMax, s, d);
        break;
    case ncclMin:
        LK_FN(run)(q, srcs, nsrc, count, ncclMin, s, d);
        break;
    case ncclAvg:
        LK_FN(run)(q, srcs, nsrc, count, ncclAvg, s, d);
        break;
    default:
        LK_FN(run)(q, srcs, nsrc, count, N4P_OP_PREMUL, s, d);
        break;
    }
}

#undef LK_TYPE
#undef LK_ESZ
#undef LK_LD
#undef LK_ST
#undef LK_DEC1
#undef LK_SPECIAL
#undef LK_LD_PLAIN
#undef LK_LD_N
#undef LK_ST_N
#undef LK_OWN
#undef LK_LOAD
