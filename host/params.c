/*
 * params.c - NCCL's parameter API (2.30.4+, handles by value since 2.30.7)
 * over this backend's own parameters: the NCCL4PY_HOST_* variables of the
 * table in env.c, in its order.
 *
 * As in NCCL:
 *   - a parameter has a C type: the sizes are "uint64_t" (read with
 *     ncclParamGetU64), the times in seconds "double" (no typed getter reads
 *     them; ncclParamGet copies the 8 bytes, ncclParamGetParameter gives the
 *     text).  A typed getter of another type fails with ncclInvalidArgument;
 *   - an unknown key fails with ncclInvalidArgument (*out / *value NULL);
 *   - ncclParamGet needs maxLen >= the value's size, else it fails with
 *     *len = 0;
 *   - strings returned stay valid until the next call of the same function
 *     on the same thread; handles and the key table live as long as the
 *     library;
 *   - ncclParamDumpAll prints every parameter to stdout: type, current
 *     value, set_by ("Default", or "EnvPlugin" when the environment sets
 *     it, NCCL's words), default and accepted values.
 * The value is the environment's at the time of the call, read and checked
 * as at communicator creation: a variable that a communicator would refuse
 * makes the getters fail with the same message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define VALUE_LEN 64

struct ncclParamHandle {
    size_t index;
};

static struct ncclParamHandle *handles;
static const char **keys;
static size_t nparams;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    size_t n = n4p_env_count();
    struct ncclParamHandle *h = calloc(n, sizeof *h);
    const char **k = calloc(n, sizeof *k);
    if (h == NULL || k == NULL) {
        free(h);
        free(k);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        n4p_env_param p;
        n4p_env_describe(i, &p);
        h[i].index = i;
        k[i] = p.name;
    }
    handles = h;
    keys = k;
    nparams = n;
}

static ncclResult_t ready(const char *fn)
{
    pthread_once(&once, init);
    if (handles == NULL)
        return n4p_fail(NULL, ncclSystemError, "%s: out of memory", fn);
    return ncclSuccess;
}

static const char *type_name(const n4p_env_param *p)
{
    return p->bytes ? "uint64_t" : "double";
}

/* The parameter named `key`, or -1 (with the reason recorded). */
static long find(const char *fn, const char *key)
{
    if (ready(fn) != ncclSuccess)
        return -1;
    if (key == NULL) {
        n4p_set_error(NULL, "%s: key is NULL", fn);
        return -1;
    }
    for (size_t i = 0; i < nparams; i++)
        if (strcmp(keys[i], key) == 0)
            return (long)i;
    n4p_set_error(NULL, "%s: unknown parameter %.128s (ncclParamGetAllParameterKeys lists them)",
                  fn, key);
    return -1;
}

/* The index of handle `h`, or -1 (with the reason recorded). */
static long index_of(const char *fn, ncclParamHandle_t h)
{
    if (ready(fn) != ncclSuccess)
        return -1;
    for (size_t i = 0; i < nparams; i++)
        if (h == &handles[i])
            return (long)i;
    n4p_set_error(NULL, "%s: %p is not a parameter handle from ncclParamBind", fn, (void *)h);
    return -1;
}

/* The current value of parameter i: 8 bytes, a uint64_t or a double. */
typedef union {
    uint64_t u;
    double d;
} value_t;

static ncclResult_t value_of(size_t i, const n4p_env_param *p, value_t *v, bool *from_env)
{
    double d;
    ncclResult_t rc = n4p_env_read(i, &d, from_env);
    if (rc != ncclSuccess)
        return rc;
    if (p->bytes)
        v->u = (uint64_t)d;
    else
        v->d = d;
    return ncclSuccess;
}

static void format_value(const n4p_env_param *p, value_t v, char *buf, size_t len)
{
    if (p->bytes)
        snprintf(buf, len, "%" PRIu64, v.u);
    else
        snprintf(buf, len, "%.15g", v.d);
}

N4P_EXPORT ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key)
{
    if (out == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "%s: out is NULL", __func__);
    long i = find(__func__, key);
    *out = i < 0 ? NULL : &handles[i];
    return i < 0 ? ncclInvalidArgument : ncclSuccess;
}

/* A typed getter: parameter h must have C type `type`. */
static ncclResult_t get_typed(const char *fn, ncclParamHandle_t h, const char *type, void *out,
                              size_t size)
{
    long i = index_of(fn, h);
    if (i < 0)
        return ncclInvalidArgument;
    if (out == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "%s: out is NULL", fn);
    n4p_env_param p;
    n4p_env_describe((size_t)i, &p);
    if (strcmp(type_name(&p), type) != 0)
        return n4p_fail(NULL, ncclInvalidArgument,
                        "%s: parameter %s is a %s, not a %s", fn, p.name, type_name(&p), type);
    value_t v;
    bool from_env;
    ncclResult_t rc = value_of((size_t)i, &p, &v, &from_env);
    if (rc != ncclSuccess)
        return rc;
    memcpy(out, &v, size); /* the types are equal, so is the size */
    return ncclSuccess;
}

#define TYPED_GETTER(suffix, ctype)                                                     \
    N4P_EXPORT ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype *out)      \
    {                                                                                   \
        _Static_assert(sizeof(ctype) <= sizeof(value_t), "value too small");            \
        return get_typed(__func__, h, #ctype, out, sizeof(ctype));                      \
    }

TYPED_GETTER(I8, int8_t)
TYPED_GETTER(I16, int16_t)
TYPED_GETTER(I32, int32_t)
TYPED_GETTER(I64, int64_t)
TYPED_GETTER(U8, uint8_t)
TYPED_GETTER(U16, uint16_t)
TYPED_GETTER(U32, uint32_t)
TYPED_GETTER(U64, uint64_t)

N4P_EXPORT ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out)
{
    /* No parameter of this backend is a string. */
    return get_typed(__func__, h, "const char*", out, sizeof *out);
}

N4P_EXPORT ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len)
{
    if (len != NULL)
        *len = 0;
    long i = index_of(__func__, h);
    if (i < 0)
        return ncclInvalidArgument;
    if (out == NULL || len == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "%s: out or len is NULL", __func__);
    n4p_env_param p;
    n4p_env_describe((size_t)i, &p);
    if (maxLen < (int)sizeof(value_t))
        return n4p_fail(NULL, ncclInvalidArgument,
                        "%s: parameter %s needs %zu bytes, maxLen is %d", __func__, p.name,
                        sizeof(value_t), maxLen);
    value_t v;
    bool from_env;
    ncclResult_t rc = value_of((size_t)i, &p, &v, &from_env);
    if (rc != ncclSuccess)
        return rc;
    memcpy(out, &v, sizeof v);
    *len = (int)sizeof v;
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclParamGetParameter(const char *key, const char **value,
                                              int *valueLen)
{
    static _Thread_local char text[VALUE_LEN];
    if (value != NULL)
        *value = NULL;
    if (valueLen != NULL)
        *valueLen = 0;
    if (value == NULL || valueLen == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "%s: value or valueLen is NULL", __func__);
    long i = find(__func__, key);
    if (i < 0)
        return ncclInvalidArgument;
    n4p_env_param p;
    n4p_env_describe((size_t)i, &p);
    value_t v;
    bool from_env;
    ncclResult_t rc = value_of((size_t)i, &p, &v, &from_env);
    if (rc != ncclSuccess)
        return rc;
    format_value(&p, v, text, sizeof text);
    *value = text;
    *valueLen = (int)strlen(text);
    return ncclSuccess;
}

N4P_EXPORT ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen)
{
    if (table == NULL || tableLen == NULL)
        return n4p_fail(NULL, ncclInvalidArgument, "%s: table or tableLen is NULL", __func__);
    ncclResult_t rc = ready(__func__);
    if (rc != ncclSuccess)
        return rc;
    *table = keys;
    *tableLen = (int)nparams;
    return ncclSuccess;
}

N4P_EXPORT void ncclParamDumpAll(void)
{
    if (ready(__func__) != ncclSuccess)
        return;
    printf("=== ncclParam Registry Dump ===\n");
    for (size_t i = 0; i < nparams; i++) {
        n4p_env_param p;
        n4p_env_describe(i, &p);
        value_t v, dflt;
        bool from_env = false;
        char cur[N4P_ERRLEN + 16], def[VALUE_LEN];
        if (p.bytes)
            dflt.u = (uint64_t)p.dflt;
        else
            dflt.d = p.dflt;
        format_value(&p, dflt, def, sizeof def);
        if (value_of(i, &p, &v, &from_env) == ncclSuccess)
            format_value(&p, v, cur, sizeof cur);
        else {
            snprintf(cur, sizeof cur, "<invalid: %s>", n4p_thread_error());
            from_env = true;
        }
        printf("%s (%s) %s\n", p.name, type_name(&p), p.help);
        printf("    Current value=%s set_by=%s default=%s\n", cur,
               from_env ? "EnvPlugin" : "Default", def);
        printf("    Accepted value: %s\n\n", p.accepted);
    }
    fflush(stdout);
}
