/*
 * env.c - the environment variables of the host backend, in one table.
 *
 * Every variable the backend reads is a row of `vars` below: its name, its
 * type, the accepted range and the default.  n4p_settings_load() reads and
 * checks all of them when a communicator is created (the only place they
 * are read), so a bad value is an ncclInvalidArgument whose message names
 * the variable and the accepted range, never a misbehaviour later.  An unset
 * or empty variable takes its default.  (NCCL_DEBUG, which belongs to NCCL,
 * is log.c's.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { SECONDS, BYTES, SWITCH }; /* SWITCH: 0, 1 or auto (stored as 2) */

typedef struct {
    const char *name;
    int type;
    double min, max; /* accepted range, inclusive */
    double dflt;     /* value when unset or empty */
    size_t offset;   /* of the field in n4p_settings: double (SECONDS), size_t (others) */
    const char *zero; /* what 0 means, or NULL */
    const char *help; /* what it sets, for the parameter API (params.c) */
} env_var;

#define ONE_YEAR 31536000.0
#define FIELD(f) offsetof(n4p_settings, f)
/* the sizes 0 (or unset) stands for */
#define SLOT_AUTO "16 MiB/(nranks+1), within 64 KiB..512 KiB"
#define RING_AUTO "32 MiB/nranks^2, within 64 KiB..1 MiB"

static const env_var vars[] = {
    {"NCCL4PY_HOST_TIMEOUT", SECONDS, 0, ONE_YEAR, 300, FIELD(timeout), "no timeout",
     "Seconds without progress before a wait fails with ncclTimeout"},
    {"NCCL4PY_HOST_WAIT_REPORT", SECONDS, 0, ONE_YEAR, 10, FIELD(wait_report),
     "never report", "Seconds a call waits before a line on stderr names the ranks it waits for"},
    {"NCCL4PY_HOST_SLOT_BYTES", BYTES, N4P_MIN_SLOT, N4P_MAX_BUF, 0, FIELD(slot_bytes),
     SLOT_AUTO, "Size of a collective staging slot; 0 (the default): " SLOT_AUTO},
    {"NCCL4PY_HOST_RING_BYTES", BYTES, N4P_MIN_RING, N4P_MAX_BUF, 0, FIELD(ring_bytes),
     RING_AUTO, "Capacity of each point-to-point ring; 0 (the default): " RING_AUTO},
    {"NCCL4PY_HOST_SINGLE_COPY", SWITCH, 0, N4P_SWITCH_AUTO, N4P_SWITCH_AUTO,
     FIELD(single_copy), NULL,
     "Large collectives copy straight between the ranks' buffers (process_vm_readv): "
     "0 never, 1 whenever the kernel allows, auto (2) above a size threshold "
     "(measuring which is faster for all-reduce, all-gather, all-to-all and broadcast)"},
};

/* The parsers below look at ASCII characters only and never consult the
 * locale (strtod would read "2,5" under a locale with a decimal comma, and
 * also takes hexadecimal floats, exponents, signs, "inf" and "nan", none of
 * which the documentation promises). */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static const char *skip_space(const char *s)
{
    while (is_space(*s))
        s++;
    return s;
}

/* The value of digit `c` in `base` (10 or 16), or -1. */
static int digit(char c, unsigned base)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (base == 16 && c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Does s[0..len) equal the upper-case word `upper`, ignoring ASCII case? */
static bool word_is(const char *s, size_t len, const char *upper)
{
    size_t i = 0;
    for (; i < len && upper[i] != '\0'; i++) {
        char c = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
        if (c != upper[i])
            return false;
    }
    return i == len && upper[i] == '\0';
}

/* A number of seconds, in decimal: digits with an optional fraction ("300",
 * "2.5", ".5"). */
static bool parse_seconds(const char *s, double *out)
{
    const char *p = skip_space(s);
    double v = 0;
    bool any = false;
    for (; digit(*p, 10) >= 0; p++, any = true)
        v = v * 10 + digit(*p, 10); /* exact below 2^53, far above the range */
    if (*p == '.') {
        uint64_t frac = 0, scale = 1;
        for (p++; digit(*p, 10) >= 0; p++, any = true)
            if (scale < 1000000000000000ull) /* 15 digits; the rest is below a femtosecond */
                frac = frac * 10 + (uint64_t)digit(*p, 10), scale *= 10;
        v += (double)frac / (double)scale;
    }
    if (!any || !isfinite(v) || *skip_space(p) != '\0')
        return false;
    *out = v;
    return true;
}

/* A number of bytes: decimal or 0x-hexadecimal digits, then optionally K, M
 * or G (binary multiples).  No sign. */
static bool parse_bytes(const char *s, double *out)
{
    const char *p = skip_space(s);
    unsigned base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16, p += 2;
    uint64_t v = 0;
    bool any = false;
    for (int d; (d = digit(*p, base)) >= 0; p++, any = true) {
        if (v > (UINT64_MAX - (uint64_t)d) / base)
            return false;
        v = v * base + (uint64_t)d;
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    if (!any || *skip_space(p) != '\0' || v > (UINT64_MAX >> shift))
        return false;
    *out = (double)(v << shift);
    return true;
}

/* 0, 1 or auto (any case). */
static bool parse_switch(const char *s, double *out)
{
    s = skip_space(s);
    size_t len = strlen(s);
    while (len > 0 && is_space(s[len - 1]))
        len--;
    if (len == 1 && (s[0] == '0' || s[0] == '1'))
        *out = s[0] - '0';
    else if (word_is(s, len, "AUTO"))
        *out = N4P_SWITCH_AUTO;
    else
        return false;
    return true;
}

/* The accepted values of `v`, in words. */
static void describe(const env_var *v, char *buf, size_t len)
{
    if (v->type == SWITCH) {
        snprintf(buf, len, "0, 1 or auto");
        return;
    }
    char zero[96] = "";
    if (v->zero != NULL)
        snprintf(zero, sizeof zero, "; 0 means %s", v->zero);
    snprintf(buf, len, "%s from %.15g to %.15g%s%s",
             v->type == SECONDS ? "a decimal number of seconds"
                                : "a whole number of bytes (decimal or 0x hexadecimal)",
             v->min, v->max, v->type == BYTES ? ", with an optional K, M or G suffix" : "", zero);
}

/* The value of `v`: its default when unset or empty (*from_env false). */
static ncclResult_t read_one(const env_var *v, double *val, bool *from_env)
{
    const char *text = getenv(v->name);
    *val = v->dflt;
    *from_env = false;
    if (text == NULL || *skip_space(text) == '\0')
        return ncclSuccess;
    bool ok = v->type == SECONDS  ? parse_seconds(text, val)
              : v->type == SWITCH ? parse_switch(text, val)
                                  : parse_bytes(text, val);
    /* 0 is accepted below `min` where the variable gives it a meaning */
    if (!ok || (*val < v->min && !(*val == 0 && v->zero != NULL)) || *val > v->max) {
        char accepted[N4P_ENV_DESCLEN];
        describe(v, accepted, sizeof accepted);
        return n4p_fail(NULL, ncclInvalidArgument,
                        "%s=%.64s is not valid: expected %s (unset or empty for the default)",
                        v->name, text, accepted);
    }
    *from_env = true;
    return ncclSuccess;
}

static ncclResult_t load_one(const env_var *v, n4p_settings *s)
{
    double val;
    bool from_env;
    ncclResult_t rc = read_one(v, &val, &from_env);
    if (rc != ncclSuccess)
        return rc;
    char *field = (char *)s + v->offset;
    if (v->type == SECONDS)
        memcpy(field, &val, sizeof val);
    else {
        size_t z = (size_t)val;
        memcpy(field, &z, sizeof z);
    }
    return ncclSuccess;
}

ncclResult_t n4p_settings_load(n4p_settings *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        ncclResult_t rc = load_one(&vars[i], s);
        if (rc != ncclSuccess)
            return rc;
    }
    s->debug = n4p_debug_level();
    return ncclSuccess;
}

/* ------------------------------------------------- the parameter API -- */

size_t n4p_env_count(void)
{
    return sizeof vars / sizeof vars[0];
}

void n4p_env_describe(size_t i, n4p_env_param *p)
{
    const env_var *v = &vars[i];
    p->name = v->name;
    p->help = v->help;
    p->bytes = v->type != SECONDS;
    p->dflt = v->dflt;
    describe(v, p->accepted, sizeof p->accepted);
}

ncclResult_t n4p_env_read(size_t i, double *val, bool *from_env)
{
    return read_one(&vars[i], val, from_env);
}
