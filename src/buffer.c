/*
 * buffer.c - array arguments -> (pointer, element count, NCCL dtype, device).
 *
 * How an object is read is decided once per Python type and cached in
 * st->buffer_kinds (type -> kind; the dict keeps the type alive, so a freed
 * type's address can never hit a stale entry).  In order of preference:
 *
 *   exchange   type(obj).__dlpack_c_exchange_api__ (capsule) or the older
 *              int __c_dlpack_exchange_api__: a C table, no Python call; the
 *              cached value is the table's capsule.
 *   buffer     the buffer protocol (NumPy host arrays, bytearray, ...); when
 *              the type also has __array_interface__, an array whose dtype
 *              the buffer protocol cannot express (ml_dtypes bfloat16 and
 *              float8) is read through that dict instead.
 *   dlpack     __dlpack__(stream=None, max_version=(1, 1)), then __dlpack__()
 *              for producers that refuse those keywords.
 *   cai        __cuda_array_interface__ (versions 2 and 3, no mask): torch
 *              still exports version 2, which only lacks the stream field.
 *              The dict names no device and no runtime is asked here, so the
 *              result says device_type CUDA, device_id -1 (unknown); its
 *              "stream" entry is not acted on here.
 *   array_if   __array_interface__ alone.  The dtype comes from
 *              obj.dtype.name when there is one (ml_dtypes typestrs are
 *              ambiguous), else from the typestr.
 *   probe      nothing on the type: look for the same attributes on the
 *              instance at each call.
 *
 * Byte order: the most specific metadata wins.  Elements stored in the other
 * byte order than this machine's are refused on every path, before any
 * dtype is decided: a typestr's mark ('>f4', ml_dtypes' '>V2'), a mark of a
 * 'descr' field, a mark anywhere in a buffer format ('>f', '!i',
 * 'T{>f:x:}') beats obj.dtype.name and an explicit spec's dtype (whose
 * reinterpretation of the bytes would be as wrong).  DLPack has no byte
 * order: its tensors are native.
 *
 * torch tensors: a type whose MRO holds torch's C base is cached as torch
 * (a 1-tuple around its kind) and every tensor of it is checked through
 * torch's own accessors before it is read, whatever the path: the negative
 * and conjugate bits (lazy views whose memory does not hold their values)
 * and, for a receive buffer, requires_grad (see check_torch).
 *
 * A tuple is an explicit spec (buf, count), (buf, dtype), (buf, count, dtype).
 * In a pair, a plain integer (an exact int or a non-int integer such as a
 * NumPy scalar) is a count; an int subclass (an IntEnum like nccl DataType)
 * or any other object is a dtype.  With a dtype the buffer may hold any
 * element type: its bytes are reinterpreted.
 *
 * __dlpack__ is called without a consumer stream (stream=None, which NumPy
 * requires for host arrays), so __dlpack_device__ is not needed: the tensor
 * carries its device.
 *
 * The layout rule: NCCL reads a buffer as one flat block, so its memory
 * order must be its logical row-major (C) order.  Strides of dimensions of
 * size 1 are ignored; 0-d and empty arrays are fine; any other layout
 * (Fortran order, transposes, steps, negative or zero strides) is refused
 * with NcclInvalid naming the argument, its shape and its strides.  Every
 * producer goes through check_row_major().
 *
 * Lifetimes: a DLPack managed tensor is owned from the moment its capsule is
 * renamed "used_..." (or the exchange API hands it over): its deleter runs
 * exactly once, on the error path or in n4p_buffer_release.  A buffer view is
 * released there too.  Interface dicts and the non-owning exchange fill carry
 * no owner, so the object itself is referenced until release.
 */
#include "bindings.h"
#include "dlpack.h"
#include "ndarray_fast.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

enum {
    K_BUFFER = 1,
    K_BUFFER_OR_AI, /* buffer protocol, __array_interface__ when it fails */
    K_DLPACK,
    K_CAI,
    K_ARRAY_IFACE,
    K_PROBE,
    /* K_EXCHANGE is cached as the exchange table's capsule, not as an int */
};

#define KIND_CACHE_MAX 1024
#define GETBUFFER_FAILED (-2)
/* out->dtype for an element type NCCL lacks, allowed when an explicit spec
 * names the dtype: out->count then counts bytes. */
#define ANY_DTYPE (-1)

#if PY_LITTLE_ENDIAN
#define NATIVE_ORDER '<'
#else
#define NATIVE_ORDER '>'
#endif

/* The data types' sizes and names are the one table's (gen/dtype_table.h,
 * n4p_dtype_size, n4p_dtype_name); here, from dtypes.def, the type of each
 * DLPack code and element size (+ 1; 0: none).  The NumPy typestr kinds and
 * struct-module formats map onto the DLPack codes (code_of_kind). */
static const signed char by_code[N4P_DL_FLOAT4_E2M1FN + 1][9] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) [dl_code][size] = value + 1,
#define N4P_BOOL_AS(Name) [N4P_DL_BOOL][1] = nccl##Name + 1,
#include "dtypes.def"
};
enum { BOOL_AS = N4P_DTYPE_BOOL_AS };

/* What every resolver needs to know about the argument. */
typedef struct {
    n4p_state *st;
    const char *name;
    int writable;
    int again;     /* N4P_BUF_AGAIN: the object's own meaning was checked */
    int any_dtype; /* an explicit dtype follows: accept any element type */
    int general;   /* N4P_BUF_GENERAL: never the numpy.ndarray fast path */
} ctx_t;

/* ---------------------------------------------------------------- errors */

static int
invalid(const ctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyErr_FormatV(c->st->nccl_invalid, fmt, ap);
    va_end(ap);
    return -1;
}

static int
err_unsupported(const ctx_t *c, const char *desc)
{
    return invalid(c, "Unsupported data type for %s: %s. NCCL supports: %s (bool as %s)",
                   c->name, desc, N4P_DTYPE_ARRAY_NAMES, n4p_dtype_name(BOOL_AS));
}


static int
err_read_only(const ctx_t *c)
{
    return invalid(c, "%s is read-only: NCCL writes its result into it (pass a writable array)",
                   c->name);
}

/* desc names the metadata that says so ("typestr '>f4'", "buffer format '!i'") */
static int
err_byte_order(const ctx_t *c, const char *desc)
{
    return invalid(c,
                   "%s has non-native byte order (%s): NCCL reads and writes elements in this "
                   "machine's byte order (%s-endian), so every value would be wrong; convert "
                   "it first (NumPy: x.astype(x.dtype.newbyteorder('='))), also to reinterpret "
                   "its bytes with an explicit dtype",
                   c->name, desc, PY_LITTLE_ENDIAN ? "little" : "big");
}

static int
err_no_protocol(const ctx_t *c, PyObject *obj)
{
    PyErr_Format(PyExc_TypeError,
                 "%s must be an array: an object supporting DLPack, the buffer protocol, "
                 "__cuda_array_interface__, or an explicit (buffer, count, dtype) spec; got %.200s",
                 c->name, Py_TYPE(obj)->tp_name);
    return -1;
}

/* ---------------------------------------------------------------- helpers */

static void
init_out(n4p_buffer *out)
{
    /* everything but the Py_buffer, which is only read when have_view is set */
    out->ptr = NULL;
    out->count = 0;
    out->dtype = 0;
    out->device_type = N4P_DEV_CPU;
    out->device_id = 0;
    out->readonly = 0;
    out->how = 0;
    out->have_view = 0;
    out->managed = NULL;
    out->versioned = 0;
    out->ref = NULL;
}

/* 1 when obj has the attribute (its value in *value, new reference), 0 when
 * it has not (AttributeError cleared), -1 on any other error. */
static int
get_optional_attr(PyObject *obj, PyObject *attr, PyObject **value)
{
    *value = PyObject_GetAttr(obj, attr);
    if (*value != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

static int
has_attr(PyObject *obj, PyObject *attr)
{
    PyObject *v;
    int r = get_optional_attr(obj, attr, &v);
    Py_XDECREF(v);
    return r;
}

/* 1 when a byte-order mark says that elements of itemsize bytes are stored
 * in the other byte order than this machine's: '<' little, '>' and '!' big
 * endian ('@', '=' and '|' are native or not applicable).  One-byte elements
 * have no byte order. */
static int
foreign_order(char mark, size_t itemsize)
{
    if (itemsize <= 1)
        return 0;
#if PY_LITTLE_ENDIAN
    return mark == '>' || mark == '!';
#else
    return mark == '<';
#endif
}

/* The data type of a DLPack code and element size, or -1. */
static int
code_dtype(unsigned code, size_t itemsize)
{
    if (code >= sizeof by_code / sizeof by_code[0] || itemsize >= sizeof by_code[0])
        return -1;
    return by_code[code][itemsize] - 1;
}

/* The DLPack code of a NumPy typestr kind (also the struct-module letters'
 * kinds): 'i', 'u', 'f', 'b' (bool); an unused code for any other. */
static unsigned
code_of_kind(char kind)
{
    switch (kind) {
    case 'i': return N4P_DL_INT;
    case 'u': return N4P_DL_UINT;
    case 'f': return N4P_DL_FLOAT;
    case 'b': return N4P_DL_BOOL;
    default: return N4P_DL_OPAQUE;
    }
}

/* The product of n extents, or -1 when one is negative or the product
 * exceeds PY_SSIZE_T_MAX (no memory block is larger). */
static int
element_count(Py_ssize_t n, const int64_t *shape, size_t *out)
{
    size_t count = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (shape[i] < 0)
            return -1;
        size_t e = (size_t)shape[i];
        if (e != 0 && count > (size_t)PY_SSIZE_T_MAX / e)
            return -1;
        count *= e;
    }
    *out = count;
    return 0;
}

/* Append "(a, b, c)" (a Python tuple's repr) to buf at *pos. */
static void
append_tuple(char *buf, size_t n, size_t *pos, Py_ssize_t ndim, const int64_t *v)
{
    /* every piece is at most 22 characters and 24 stay free for the end */
    *pos += (size_t)PyOS_snprintf(buf + *pos, n - *pos, "(");
    Py_ssize_t i;
    for (i = 0; i < ndim && *pos < n - 24; i++)
        *pos += (size_t)PyOS_snprintf(buf + *pos, n - *pos, "%s%lld", i ? ", " : "",
                                      (long long)v[i]);
    if (i < ndim)
        *pos += (size_t)PyOS_snprintf(buf + *pos, n - *pos, ", ...");
    *pos += (size_t)PyOS_snprintf(buf + *pos, n - *pos, ndim == 1 ? ",)" : ")");
}

/* The layout rule (see the top of this file).  `count` is the number of
 * elements, strides are in units of `unit` (named by `units` in the
 * message); NULL strides mean row-major. */
static int
check_row_major(const ctx_t *c, Py_ssize_t ndim, const int64_t *shape, const int64_t *strides,
                size_t count, int64_t unit, const char *units)
{
    if (strides == NULL || count == 0)
        return 0;
    int64_t want = unit;
    Py_ssize_t i;
    for (i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 1)
            continue;
        if (strides[i] != want)
            break;
        want *= shape[i];
    }
    if (i < 0)
        return 0;
    char desc[1024];
    size_t pos = 0;
    append_tuple(desc, 480, &pos, ndim, shape);
    pos += (size_t)PyOS_snprintf(desc + pos, sizeof desc - pos, ", strides ");
    append_tuple(desc, sizeof desc - 32, &pos, ndim, strides);
    return invalid(c,
                   "%s is not contiguous in row-major (C) order (shape %s %s): NCCL reads a "
                   "buffer as one flat block in row-major order, so this layout would give "
                   "a wrong result; pass a C-contiguous array (e.g. numpy.ascontiguousarray(x), "
                   "x.contiguous())",
                   c->name, desc, units);
}

/* Element type check and fill; size_t itemsize is the byte size of an
 * element of the unsupported type (0 when unknown or fractional). */
static int
set_type(const ctx_t *c, n4p_buffer *out, int dtype, size_t count, size_t itemsize,
         const char *desc)
{
    if (dtype >= 0) {
        out->dtype = dtype;
        out->count = count;
        return 0;
    }
    if (c->any_dtype && itemsize > 0 && count <= SIZE_MAX / itemsize) {
        out->dtype = ANY_DTYPE;
        out->count = count * itemsize;
        return 0;
    }
    return err_unsupported(c, desc);
}

/* -------------------------------------------------------- buffer protocol */

/* 1 when a struct-module format stores its items in the other byte order:
 * a mark anywhere outside the ":name:" of a field counts (PEP 3118 formats
 * may change the order between the fields of a struct). */
static int
format_foreign(const char *fmt, size_t itemsize)
{
    int in_name = 0;
    for (const char *p = fmt; *p != '\0'; p++) {
        if (*p == ':')
            in_name = !in_name;
        else if (!in_name && foreign_order(*p, itemsize))
            return 1;
    }
    return 0;
}

/* NCCL dtype of a struct-module format in this machine's byte order, or -1:
 * the letter's DLPack code, and the element size it implies ('l' and 'n'
 * vary by platform). */
static int
format_dtype(const char *fmt, size_t itemsize)
{
#define IMPLIES(code, size) return itemsize == (size) ? by_code[code][size] - 1 : -1
    if (fmt == NULL)
        return itemsize == 1 ? ncclUint8 : -1;
    if (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<' || fmt[0] == '>' || fmt[0] == '!')
        fmt++;
    if (fmt[0] == '\0' || fmt[1] != '\0')
        return -1;
    switch (fmt[0]) {
    case '?': IMPLIES(N4P_DL_BOOL, 1);
    case 'b': IMPLIES(N4P_DL_INT, 1);
    case 'B': IMPLIES(N4P_DL_UINT, 1);
    case 'e': IMPLIES(N4P_DL_FLOAT, 2);
    case 'f': IMPLIES(N4P_DL_FLOAT, 4);
    case 'd': IMPLIES(N4P_DL_FLOAT, 8);
    case 'i': case 'l': case 'q': case 'n': return code_dtype(N4P_DL_INT, itemsize);
    case 'I': case 'L': case 'Q': case 'N': return code_dtype(N4P_DL_UINT, itemsize);
    default: return -1;
    }
#undef IMPLIES
}

static void
format_desc(char *buf, size_t n, const char *fmt, size_t itemsize)
{
    static const char *const known[][2] = {
        {"h", "int16"},     {"H", "uint16"},      {"Ze", "complex32"}, {"Zf", "complex64"},
        {"Zd", "complex128"}, {"g", "longdouble"}, {"O", "object"},
    };
    const char *core = fmt;
    if (core[0] == '@' || core[0] == '=' || core[0] == '<' || core[0] == '>' || core[0] == '!')
        core++;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(core, known[i][0]) == 0) {
            PyOS_snprintf(buf, n, "%s (buffer format '%s')", known[i][1], fmt);
            return;
        }
    }
    PyOS_snprintf(buf, n, "buffer format '%s' (%zu-byte items)", fmt, itemsize);
}

/* The layout rule on a Py_buffer's own arrays (the common case, without a
 * copy); check_row_major() explains a refusal. */
static int
row_major_view(const Py_buffer *v)
{
    Py_ssize_t want = v->itemsize;
    for (Py_ssize_t i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] == 1)
            continue;
        if (v->strides[i] != want)
            return 0;
        want *= v->shape[i];
    }
    return 1;
}

/* GETBUFFER_FAILED when the object refused to export (exception set). */
static int
from_buffer(const ctx_t *c, PyObject *obj, n4p_buffer *out)
{
    Py_buffer *v = &out->view;
    if (PyObject_GetBuffer(obj, v, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return GETBUFFER_FAILED;
    out->have_view = 1;
    size_t itemsize = v->itemsize > 0 ? (size_t)v->itemsize : 0;
    if (c->writable && v->readonly) {
        err_read_only(c);
        goto fail;
    }
    if (v->ndim > 0 && v->strides != NULL && v->len > 0 && !row_major_view(v)) {
        int64_t shape[PyBUF_MAX_NDIM], strides[PyBUF_MAX_NDIM];
        Py_ssize_t nd = v->ndim < PyBUF_MAX_NDIM ? v->ndim : PyBUF_MAX_NDIM;
        for (Py_ssize_t i = 0; i < nd; i++) {
            shape[i] = (int64_t)v->shape[i];
            strides[i] = (int64_t)v->strides[i];
        }
        if (check_row_major(c, nd, shape, strides, (size_t)v->len, v->itemsize, "bytes") < 0)
            goto fail;
    }
    /* a one-letter format (NumPy's for native arrays) has no byte-order mark */
    if (v->format != NULL && v->format[0] != '\0' && v->format[1] != '\0' &&
        format_foreign(v->format, itemsize)) {
        char desc[96];
        PyOS_snprintf(desc, sizeof(desc), "buffer format '%.60s'", v->format);
        err_byte_order(c, desc);
        goto fail;
    }
    int dtype = itemsize ? format_dtype(v->format, itemsize) : -1;
    if (dtype < 0 && !(c->any_dtype && itemsize)) {
        char desc[96];
        format_desc(desc, sizeof(desc), v->format ? v->format : "B", itemsize);
        err_unsupported(c, desc);
        goto fail;
    }
    size_t len = (size_t)v->len;
    if (dtype >= 0) {
        out->dtype = dtype;
        out->count = len / itemsize;
    }
    else {
        out->dtype = ANY_DTYPE;
        out->count = len;
    }
    out->ptr = v->buf;
    out->device_type = N4P_DEV_CPU;
    out->device_id = 0;
    out->readonly = v->readonly != 0;
    return 0;
fail:
    PyBuffer_Release(v);
    out->have_view = 0;
    return -1;
}

/* ----------------------------------------------------------------- DLPack */

static int
dl_dtype(n4p_dldtype t)
{
    if (t.lanes != 1)
        return -1;
    return t.bits % 8 ? -1 : code_dtype(t.code, t.bits / 8u);
}

static void
dl_dtype_desc(char *buf, size_t n, n4p_dldtype t)
{
    static const char *const codes[] = {
        "int",           "uint",          "float",         "opaque",
        "bfloat",        "complex",       "bool",          "float8_e3m4",
        "float8_e4m3",   "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
        "float8_e5m2",   "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn",
        "float6_e3m2fn", "float4_e2m1fn",
    };
    char base[48];
    if (t.code <= N4P_DL_COMPLEX)
        PyOS_snprintf(base, sizeof(base), "%s%u", codes[t.code], (unsigned)t.bits);
    else if (t.code < sizeof(codes) / sizeof(codes[0]))
        PyOS_snprintf(base, sizeof(base), "%s", codes[t.code]);
    else
        PyOS_snprintf(base, sizeof(base), "DLPack type code %u", (unsigned)t.code);
    if (t.lanes != 1)
        PyOS_snprintf(buf, n, "%s x %u lanes (DLPack code %u, %u bits)", base,
                      (unsigned)t.lanes, (unsigned)t.code, (unsigned)t.bits);
    else
        PyOS_snprintf(buf, n, "%s (DLPack code %u, %u bits)", base, (unsigned)t.code,
                      (unsigned)t.bits);
}

static int
fill_dl(const ctx_t *c, const n4p_dltensor *t, int readonly, n4p_buffer *out)
{
    if (readonly && c->writable)
        return err_read_only(c);
    size_t count;
    if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL) ||
        element_count(t->ndim, t->shape, &count) < 0)
        return invalid(c, "%s: invalid DLPack tensor (bad ndim or shape)", c->name);
    if (check_row_major(c, t->ndim, t->shape, t->strides, count, 1, "elements") < 0)
        return -1;
    int dtype = dl_dtype(t->dtype);
    if (dtype < 0) {
        unsigned bits = (unsigned)t->dtype.bits * t->dtype.lanes;
        char desc[96];
        dl_dtype_desc(desc, sizeof(desc), t->dtype);
        if (set_type(c, out, -1, count, bits % 8 ? 0 : bits / 8, desc) < 0)
            return -1;
    }
    else {
        out->dtype = dtype;
        out->count = count;
    }
    out->ptr = (char *)t->data + t->byte_offset;
    out->device_type = t->device.device_type;
    out->device_id = t->device.device_id;
    out->readonly = readonly;
    return 0;
}

/* A deleter may be Python code (a ctypes callback, a producer written with
 * cffi), which must not run with an exception pending: a refusal's
 * NcclInvalid is set aside while it runs and restored after. */
#if PY_VERSION_HEX >= 0x030C0000
#define SET_ASIDE(e) PyObject *e = PyErr_GetRaisedException()
#define RESTORE(e) PyErr_SetRaisedException(e)
#else
#define SET_ASIDE(e)                                                                           \
    PyObject *e##_type, *e##_value, *e##_tb;                                                   \
    PyErr_Fetch(&e##_type, &e##_value, &e##_tb)
#define RESTORE(e) PyErr_Restore(e##_type, e##_value, e##_tb)
#endif

static void
delete_versioned(n4p_dlmanaged_v *m)
{
    if (m->deleter == NULL)
        return;
    SET_ASIDE(pending);
    m->deleter(m);
    RESTORE(pending);
}

static void
delete_legacy(n4p_dlmanaged *m)
{
    if (m->deleter == NULL)
        return;
    SET_ASIDE(pending);
    m->deleter(m);
    RESTORE(pending);
}

/* Takes ownership of m: on failure its deleter has run. */
static int
adopt_versioned(const ctx_t *c, n4p_dlmanaged_v *m, n4p_buffer *out)
{
    int r;
    if (m->version.major != N4P_DLPACK_MAJOR)
        r = invalid(c, "%s: DLPack version %u.%u is not supported (nccl4py reads DLPack 1.x)",
                    c->name, (unsigned)m->version.major, (unsigned)m->version.minor);
    else
        r = fill_dl(c, &m->dl_tensor, (m->flags & N4P_DLFLAG_READ_ONLY) != 0, out);
    if (r < 0) {
        delete_versioned(m);
        return -1;
    }
    out->managed = m;
    out->versioned = 1;
    return 0;
}

static int
take_capsule(const ctx_t *c, PyObject *cap, n4p_buffer *out)
{
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() returned %.200s, not a DLPack capsule",
                     c->name, Py_TYPE(cap)->tp_name);
        return -1;
    }
    const char *cname = PyCapsule_GetName(cap);
    if (cname != NULL && strcmp(cname, N4P_CAPSULE_VERSIONED) == 0) {
        n4p_dlmanaged_v *m = PyCapsule_GetPointer(cap, N4P_CAPSULE_VERSIONED);
        if (m == NULL || PyCapsule_SetName(cap, N4P_CAPSULE_VERSIONED_USED) < 0)
            return -1;
        return adopt_versioned(c, m, out);
    }
    if (cname != NULL && strcmp(cname, N4P_CAPSULE_LEGACY) == 0) {
        n4p_dlmanaged *m = PyCapsule_GetPointer(cap, N4P_CAPSULE_LEGACY);
        if (m == NULL || PyCapsule_SetName(cap, N4P_CAPSULE_LEGACY_USED) < 0)
            return -1;
        if (fill_dl(c, &m->dl_tensor, 0, out) < 0) {
            delete_legacy(m);
            return -1;
        }
        out->managed = m;
        out->versioned = 0;
        return 0;
    }
    if (cname != NULL && strncmp(cname, "used_", 5) == 0)
        PyErr_Format(PyExc_TypeError,
                     "%s.__dlpack__() returned a DLPack capsule that was already consumed",
                     c->name);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s.__dlpack__() returned a capsule named %s%s%s, expected "
                     "'dltensor_versioned' or 'dltensor'",
                     c->name, cname ? "'" : "", cname ? cname : "NULL", cname ? "'" : "");
    return -1;
}

static PyObject *
call_dlpack(const ctx_t *c, PyObject *obj)
{
    n4p_state *st = c->st;
    PyObject *args[4] = {NULL, obj, Py_None, st->dlpack_max_version};
    size_t self_only = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
    PyObject *cap = PyObject_VectorcallMethod(st->str_dlpack, args + 1, self_only,
                                              st->dlpack_kwnames);
    if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* a producer that predates max_version (and stream=) */
        PyErr_Clear();
        cap = PyObject_VectorcallMethod(st->str_dlpack, args + 1, self_only, NULL);
    }
    return cap;
}

static int
from_dlpack(const ctx_t *c, PyObject *obj, n4p_buffer *out)
{
    PyObject *cap = call_dlpack(c, obj);
    if (cap == NULL)
        return -1;
    int r = take_capsule(c, cap, out);
    Py_DECREF(cap);
    return r;
}

/* ------------------------------------------------------- DLPack exchange */

static int
producer_failed(const ctx_t *c, const char *fn)
{
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the DLPack exchange API function %s failed without setting an "
                     "exception",
                     c->name, fn);
    return -1;
}

static int
from_exchange(const ctx_t *c, const n4p_dlexchange_api *api, PyObject *obj, n4p_buffer *out)
{
    /* api is never NULL: kind_of() returns kind 0 only with *api set (the
     * kinds cached as ints are >= K_BUFFER) */
    if (api->dltensor_from_py_object_no_sync != NULL) { /* NOLINT(clang-analyzer-core.NullDereference) */
        n4p_dltensor t;
        if (api->dltensor_from_py_object_no_sync(obj, &t) != 0)
            return producer_failed(c, "dltensor_from_py_object_no_sync");
        if (fill_dl(c, &t, 0, out) < 0)
            return -1;
        out->ref = Py_NewRef(obj); /* the tensor's storage lives as long as obj */
        return 0;
    }
    n4p_dlmanaged_v *m = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0 || m == NULL)
        return producer_failed(c, "managed_tensor_from_py_object_no_sync");
    return adopt_versioned(c, m, out);
}

/* The version-1 table behind an exchange capsule, or NULL when it offers none
 * that can export a tensor. */
static const n4p_dlexchange_api *
exchange_table(PyObject *capsule)
{
    const n4p_dlexchange_header *h = PyCapsule_GetPointer(capsule, N4P_CAPSULE_EXCHANGE_API);
    while (h != NULL && h->version.major != N4P_DLPACK_MAJOR)
        h = h->prev_api;
    const n4p_dlexchange_api *api = (const n4p_dlexchange_api *)h;
    if (api == NULL || (api->dltensor_from_py_object_no_sync == NULL &&
                        api->managed_tensor_from_py_object_no_sync == NULL))
        return NULL;
    return api;
}

/* A new reference to a capsule "dlpack_exchange_api" for tp, None when tp
 * offers no usable table, NULL on error. */
static PyObject *
exchange_capsule_of_type(PyTypeObject *tp)
{
    PyObject *v;
    PyObject *attr = PyUnicode_FromString("__dlpack_c_exchange_api__");
    if (attr == NULL)
        return NULL;
    int r = get_optional_attr((PyObject *)tp, attr, &v);
    Py_DECREF(attr);
    if (r < 0)
        return NULL;
    if (r > 0) {
        if (PyCapsule_IsValid(v, N4P_CAPSULE_EXCHANGE_API) && exchange_table(v) != NULL)
            return v;
        Py_DECREF(v);
    }
    attr = PyUnicode_FromString("__c_dlpack_exchange_api__");
    if (attr == NULL)
        return NULL;
    r = get_optional_attr((PyObject *)tp, attr, &v);
    Py_DECREF(attr);
    if (r < 0)
        return NULL;
    if (r > 0 && PyLong_Check(v)) {
        void *p = PyLong_AsVoidPtr(v);
        Py_DECREF(v);
        if (p == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        PyObject *cap = PyCapsule_New(p, N4P_CAPSULE_EXCHANGE_API, NULL);
        if (cap == NULL || exchange_table(cap) != NULL)
            return cap;
        Py_DECREF(cap);
        Py_RETURN_NONE;
    }
    Py_XDECREF(v);
    Py_RETURN_NONE;
}

/* ------------------------------------- __cuda_array_interface__ and kin */

static int
iface_error(const ctx_t *c, const char *what, const char *problem)
{
    PyErr_Format(PyExc_TypeError, "%s: invalid %s: %s", c->name, what, problem);
    return -1;
}

/* NCCL dtype of a NumPy typestr ("<f4", "|u1"...), or -1; *itemsize and
 * *kind are filled whenever the string parses. */
static int
typestr_dtype(const char *ts, size_t *itemsize, char *kind)
{
    char order = ts[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return -1;
    *kind = ts[1];
    char *end;
    if (ts[1] == '\0' || ts[2] < '0' || ts[2] > '9')
        return -1;
    unsigned long size = strtoul(ts + 2, &end, 10);
    if (*end != '\0' || size == 0 || size > 64)
        return -1;
    *itemsize = (size_t)size;
    if (size > 1 && order != '|' && order != '=' && order != NATIVE_ORDER)
        return -1;
    return code_dtype(code_of_kind(ts[1]), (size_t)size);
}

static void
typestr_desc(char *buf, size_t n, const char *ts, char kind, size_t itemsize)
{
    const char *base = kind == 'i' ? "int" : kind == 'u' ? "uint" : kind == 'f' ? "float"
                     : kind == 'c' ? "complex" : NULL;
    if (base != NULL && itemsize > 0)
        PyOS_snprintf(buf, n, "%s%zu (typestr '%s')", base, itemsize * 8, ts);
    else
        PyOS_snprintf(buf, n, "typestr '%s'", ts);
}

/* NCCL dtype from obj.dtype.name: how __array_interface__ objects are read,
 * since ml_dtypes types have ambiguous typestrs ("<V2" for bfloat16, "<f1"
 * for float8_e5m2).  -1 for an unknown name (copied to buf), -2 on error,
 * -3 when obj has no dtype name. */
static int
dtype_by_name(PyObject *obj, char *buf, size_t n)
{
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    PyObject *name = dt != NULL ? PyObject_GetAttrString(dt, "name") : NULL;
    Py_XDECREF(dt);
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -2;
        PyErr_Clear();
        return -3;
    }
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    int r = s != NULL ? -1 : PyErr_Occurred() ? -2 : -3;
    if (s != NULL) {
        PyOS_snprintf(buf, n, "%s", s);
        if (strcmp(s, "bool") == 0)
            r = BOOL_AS;
        for (int i = 0; i < ncclNumTypes; i++)
            if (strcmp(s, n4p_dtype_name(i)) == 0)
                r = i;
    }
    Py_DECREF(name);
    return r;
}

/* Read a tuple of ints into a new int64 array (PyMem), NULL on error. */
static int64_t *
int64_tuple(const ctx_t *c, const char *what, const char *field, PyObject *t, Py_ssize_t *n)
{
    if (!PyTuple_Check(t)) {
        char msg[96];
        PyOS_snprintf(msg, sizeof(msg), "'%s' must be a tuple of ints", field);
        iface_error(c, what, msg);
        return NULL;
    }
    *n = PyTuple_GET_SIZE(t);
    int64_t *a = PyMem_Malloc(sizeof(int64_t) * (size_t)(*n > 0 ? *n : 1));
    if (a == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *e = PyTuple_GET_ITEM(t, i);
        long long v = PyLong_Check(e) ? PyLong_AsLongLong(e) : -1;
        if (!PyLong_Check(e) || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            char msg[96];
            PyOS_snprintf(msg, sizeof(msg), "'%s' must be a tuple of ints", field);
            iface_error(c, what, msg);
            PyMem_Free(a);
            return NULL;
        }
        a[i] = (int64_t)v;
    }
    return a;
}

typedef struct {
    void *ptr;
    int readonly;
    int64_t *shape;
    int64_t *strides; /* bytes; NULL = C order */
    Py_ssize_t ndim;
    size_t count;
    const char *typestr;
    PyObject *descr; /* borrowed from the dict (a copy of the producer's on a free-threaded
                      * build: from_interface_dict), or NULL */
} iface_t;

/* 1 when a field of an interface's 'descr' (a list of (name, typestr or
 * nested descr[, shape])) is stored in the other byte order (the field and
 * its typestr described in buf); 0 when none is; -1 with an exception for a
 * descr nested too deeply to check. */
static int
descr_foreign(const ctx_t *c, const char *what, PyObject *descr, int depth, char *buf, size_t n)
{
    if (!PyList_Check(descr))
        return 0;
    if (depth > 32)
        return iface_error(c, what, "'descr' is nested too deeply");
#if N4P_FREE_THREADED
    /* the list is the producer's: another thread may change it while it is
     * read, so its items are read from a snapshot that holds them */
    PyObject *items = PyList_AsTuple(descr);
    if (items == NULL)
        return -1;
#define DESCR_SIZE PyTuple_GET_SIZE(items)
#define DESCR_ITEM(i) PyTuple_GET_ITEM(items, i)
#else
#define DESCR_SIZE PyList_GET_SIZE(descr)
#define DESCR_ITEM(i) PyList_GET_ITEM(descr, i)
#endif
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < DESCR_SIZE; i++) {
        PyObject *field = DESCR_ITEM(i);
        if (!PyTuple_Check(field) || PyTuple_GET_SIZE(field) < 2)
            continue;
        PyObject *t = PyTuple_GET_ITEM(field, 1);
        if (PyList_Check(t)) {
            r = descr_foreign(c, what, t, depth + 1, buf, n);
            continue;
        }
        const char *ts = PyUnicode_Check(t) ? PyUnicode_AsUTF8(t) : NULL;
        if (ts == NULL) {
            PyErr_Clear();
            continue;
        }
        size_t itemsize = 0;
        char kind = 0;
        (void)typestr_dtype(ts, &itemsize, &kind);
        if (foreign_order(ts[0], itemsize)) {
            PyObject *name = PyTuple_GET_ITEM(field, 0);
            const char *ns = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
            if (ns == NULL)
                PyErr_Clear();
            PyOS_snprintf(buf, n, "%s 'descr' field '%.40s' with typestr '%.20s'", what,
                          ns ? ns : "?", ts);
            r = 1;
        }
    }
#undef DESCR_SIZE
#undef DESCR_ITEM
#if N4P_FREE_THREADED
    Py_DECREF(items);
#endif
    return r;
}

static int
iface_data(const ctx_t *c, const char *what, PyObject *d, iface_t *f)
{
    PyObject *data = PyDict_GetItemString(d, "data");
    if (data == NULL || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(data, 0)))
        return iface_error(c, what, "'data' must be a (pointer, read-only) tuple");
    f->ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (f->ptr == NULL && PyErr_Occurred())
        return -1;
    f->readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    return f->readonly < 0 ? -1 : 0;
}

static int
iface_version(const ctx_t *c, const char *what, PyObject *d)
{
    PyObject *v = PyDict_GetItemString(d, "version");
    if (v == NULL || !PyLong_Check(v))
        return iface_error(c, what, "'version' must be an int");
    long version = PyLong_AsLong(v);
    if (version == -1 && PyErr_Occurred())
        return -1;
    if (version != 2 && version != 3)
        return invalid(c, "%s: %s version %ld is not supported (versions 2 and 3 are)", c->name,
                       what, version);
    PyObject *mask = PyDict_GetItemString(d, "mask");
    if (mask != NULL && mask != Py_None)
        return invalid(c, "%s: masked arrays are not supported (%s has a mask)", c->name, what);
    return 0;
}

/* Parse the dict's fields into f (f->shape and f->strides to PyMem_Free). */
static int
iface_parse(const ctx_t *c, const char *what, PyObject *d, iface_t *f)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a dict, got %.200s", c->name, what,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    if (iface_version(c, what, d) < 0 || iface_data(c, what, d, f) < 0)
        return -1;
    PyObject *ts = PyDict_GetItemString(d, "typestr");
    if (ts == NULL || !PyUnicode_Check(ts) || (f->typestr = PyUnicode_AsUTF8(ts)) == NULL) {
        PyErr_Clear();
        return iface_error(c, what, "'typestr' must be a str");
    }
    f->descr = PyDict_GetItemString(d, "descr");
    PyObject *shape = PyDict_GetItemString(d, "shape");
    if (shape == NULL)
        return iface_error(c, what, "'shape' is missing");
    f->shape = int64_tuple(c, what, "shape", shape, &f->ndim);
    if (f->shape == NULL)
        return -1;
    if (element_count(f->ndim, f->shape, &f->count) < 0)
        return iface_error(c, what, "'shape' has a negative or too large extent");
    PyObject *strides = PyDict_GetItemString(d, "strides");
    if (strides == NULL || strides == Py_None)
        return 0;
    Py_ssize_t n;
    f->strides = int64_tuple(c, what, "strides", strides, &n);
    if (f->strides == NULL)
        return -1;
    if (n != f->ndim)
        return iface_error(c, what, "'strides' and 'shape' differ in length");
    return 0;
}

/* The byte order is decided first: a typestr's (or a descr field's) mark
 * wins over every name (obj.dtype.name, an explicit spec's dtype). */
static int
iface_fill(const ctx_t *c, PyObject *obj, int cai, const iface_t *f, n4p_buffer *out)
{
    const char *what = cai ? "__cuda_array_interface__" : "__array_interface__";
    if (f->readonly && c->writable)
        return err_read_only(c);
    size_t itemsize = 0;
    char kind = 0;
    char desc[160];
    int dtype = typestr_dtype(f->typestr, &itemsize, &kind);
    if (foreign_order(f->typestr[0], itemsize)) {
        PyOS_snprintf(desc, sizeof(desc), "%s typestr '%.20s'", what, f->typestr);
        return err_byte_order(c, desc);
    }
    if (f->descr != NULL) {
        int r = descr_foreign(c, what, f->descr, 0, desc, sizeof(desc));
        if (r != 0)
            return r < 0 ? -1 : err_byte_order(c, desc);
    }
    typestr_desc(desc, sizeof(desc), f->typestr, kind, itemsize);
    if (!cai) {
        int by_name = dtype_by_name(obj, desc, sizeof(desc));
        if (by_name == -2)
            return -1;
        if (by_name != -3)
            dtype = by_name >= 0 && n4p_dtype_size(by_name) == itemsize ? by_name : -1;
    }
    if (itemsize > 0 && f->count > (size_t)PY_SSIZE_T_MAX / itemsize)
        return iface_error(c, what, "the array is too large");
    if (itemsize > 0 &&
        check_row_major(c, f->ndim, f->shape, f->strides, f->count, (int64_t)itemsize,
                        "bytes") < 0)
        return -1;
    if (set_type(c, out, dtype, f->count, itemsize, desc) < 0)
        return -1;
    out->ptr = f->ptr;
    out->readonly = f->readonly;
    out->device_type = cai ? N4P_DEV_CUDA : N4P_DEV_CPU;
    out->device_id = cai ? -1 : 0; /* CAI says nothing about the device */
    return 0;
}

/* From the interface dict d of obj. */
static int
from_interface_dict(const ctx_t *c, PyObject *obj, PyObject *d, int cai, n4p_buffer *out)
{
    const char *what = cai ? "__cuda_array_interface__" : "__array_interface__";
    iface_t f = {0};
#if N4P_FREE_THREADED
    /* The dict is the producer's: another thread may change it while it is
     * read, dropping the values looked up (borrowed) from it; a copy, made
     * under the dict's lock, holds them.  (With a GIL no other thread runs
     * between the lookups and their use.) */
    if (PyDict_Check(d) && (d = PyDict_Copy(d)) == NULL)
        return -1;
    else if (!PyDict_Check(d))
        Py_INCREF(d);
#endif
    int r = iface_parse(c, what, d, &f);
    if (r == 0)
        r = iface_fill(c, obj, cai, &f, out);
    PyMem_Free(f.shape);
    PyMem_Free(f.strides);
#if N4P_FREE_THREADED
    Py_DECREF(d);
#endif
    if (r == 0)
        out->ref = Py_NewRef(obj); /* the dict names no owner */
    return r;
}

static int
from_interface(const ctx_t *c, PyObject *obj, int cai, n4p_buffer *out)
{
    PyObject *d = PyObject_GetAttr(obj, cai ? c->st->str_cai : c->st->str_array_interface);
    if (d == NULL)
        return -1;
    int r = from_interface_dict(c, obj, d, cai, out);
    Py_DECREF(d);
    return r;
}

/* ---------------------------------------------------------- torch tensors */

/* torch's C base of every tensor type, found by name in tp's MRO (torch is
 * never imported here), or NULL. */
static PyTypeObject *
torch_base(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (strcmp(b->tp_name, "torch._C.TensorBase") == 0 ||
            strcmp(b->tp_name, "torch._C._TensorBase") == 0)
            return b;
    }
    return NULL;
}

/* The base's descriptor `name` (its own C accessor, which also serves
 * __torch_function__ subclasses), None when this torch has none. */
static PyObject *
torch_descr(PyTypeObject *base, const char *name)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)base, name);
    if (d == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    if (d != NULL && Py_TYPE(d)->tp_descr_get == NULL) {
        Py_DECREF(d);
        PyErr_Format(PyExc_RuntimeError, "%s.%s is not a descriptor", base->tp_name, name);
        return NULL;
    }
    return d;
}

/* Take the accessors from torch's base type, once. */
static int
torch_accessors(n4p_state *st, PyTypeObject *base)
{
    if (N4P_FT_LOAD(&st->torch_requires_grad) != NULL)
        return 0;
    PyObject *neg = torch_descr(base, "is_neg");
    PyObject *conj = neg != NULL ? torch_descr(base, "is_conj") : NULL;
    PyObject *grad = conj != NULL ? torch_descr(base, "requires_grad") : NULL;
    if (grad == NULL) {
        Py_XDECREF(neg);
        Py_XDECREF(conj);
        return -1;
    }
#if N4P_FREE_THREADED
    /* another thread may have taken them meanwhile: the first one's stay
     * (requires_grad, stored last with release order, says all three are) */
    n4p_lock(&st->torch_mu);
    if (st->torch_requires_grad == NULL) {
        st->torch_is_neg = neg;
        st->torch_is_conj = conj;
        N4P_FT_STORE(&st->torch_requires_grad, grad);
        neg = conj = grad = NULL;
    }
    n4p_unlock(&st->torch_mu);
    Py_XDECREF(neg);
    Py_XDECREF(conj);
    Py_XDECREF(grad);
#else
    st->torch_is_neg = neg;
    st->torch_is_conj = conj;
    st->torch_requires_grad = grad;
#endif
    return 0;
}

/* A tensor's bit through a method descriptor: 1, 0 or -1 on error.  obj is
 * an instance of the descriptor's class (torch's base is in its MRO), so a
 * plain no-argument C method is called directly (the descriptor's own
 * checks would only repeat that). */
static int
torch_bit(PyObject *method, PyObject *obj)
{
    if (method == Py_None)
        return 0;
    PyObject *v;
    PyMethodDef *def = Py_IS_TYPE(method, &PyMethodDescr_Type)
                           ? ((PyMethodDescrObject *)method)->d_method : NULL;
    if (def != NULL && def->ml_flags == METH_NOARGS)
        v = def->ml_meth(obj, NULL);
    else
        v = PyObject_Vectorcall(method, &obj, 1, NULL);
    if (v == NULL)
        return -1;
    int r = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int
torch_requires_grad(n4p_state *st, PyObject *obj)
{
    PyObject *d = st->torch_requires_grad;
    if (d == Py_None)
        return 0;
    PyObject *v;
    if (Py_IS_TYPE(d, &PyGetSetDescr_Type)) { /* the C getter itself, as above */
        PyGetSetDef *gs = ((PyGetSetDescrObject *)d)->d_getset;
        v = gs->get(obj, gs->closure);
    }
    else
        v = Py_TYPE(d)->tp_descr_get(d, obj, (PyObject *)Py_TYPE(obj));
    if (v == NULL)
        return -1;
    int r = v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* What a torch tensor means beyond its memory, checked before it is read:
 * the lazy negation and conjugation bits (the memory holds the values
 * un-negated, un-conjugated: NCCL would read and write them as they are
 * stored) and autograd (a receive buffer written by NCCL is written behind
 * its back: the version counter does not move, gradients go wrong).  A send
 * buffer that requires grad is read, as reading a tensor's values never
 * changes its autograd state. */
static int
check_torch(const ctx_t *c, PyObject *obj)
{
    n4p_state *st = c->st;
    int r;
    if (c->writable && (r = torch_requires_grad(st, obj)) != 0)
        return r < 0 ? -1
                     : invalid(c,
                               "%s requires grad: NCCL would write into it behind autograd's "
                               "back (its version counter unchanged, gradients computed from "
                               "it wrong), which torch refuses too (its DLPack export); "
                               "receive into a tensor that does not require grad and copy it "
                               "in under torch.no_grad(), or pass x.detach() to write its "
                               "memory on purpose",
                               c->name);
    if (c->again)
        return 0; /* the view bits were checked for this call's other buffer */
    if ((r = torch_bit(st->torch_is_neg, obj)) != 0)
        return r < 0 ? -1
                     : invalid(c,
                               "%s is a torch tensor with the negative bit set (a lazy "
                               "negation, e.g. torch._neg_view(x) or x.conj().imag): its memory "
                               "holds the values un-negated, so NCCL would read and write the "
                               "wrong sign; pass x.resolve_neg() (a copy; receive into a plain "
                               "tensor and copy the result)",
                               c->name);
    /* only complex tensors carry the conjugate bit, and NCCL has no complex
     * type: only an explicit spec reinterprets one */
    if (c->any_dtype && (r = torch_bit(st->torch_is_conj, obj)) != 0)
        return r < 0 ? -1
                     : invalid(c,
                               "%s is a torch tensor with the conjugate bit set (a lazy "
                               "conjugation, e.g. x.conj()): its memory holds the values "
                               "un-conjugated, so NCCL would read and write the imaginary "
                               "parts with the wrong sign (torch's own DLPack export refuses "
                               "it); pass x.resolve_conj()",
                               c->name);
    return 0;
}

/* __dlpack__ of a torch tensor: torch's export refuses a tensor that
 * requires grad, which a send buffer may (check_torch), so its detached
 * alias (the same memory) is exported then. */
static int
torch_from_dlpack(const ctx_t *c, PyObject *obj, n4p_buffer *out)
{
    int r = c->writable ? 0 : torch_requires_grad(c->st, obj);
    if (r <= 0)
        return r < 0 ? -1 : from_dlpack(c, obj, out);
    PyObject *alias = PyObject_CallMethod(obj, "detach", NULL);
    if (alias == NULL)
        return -1;
    r = from_dlpack(c, alias, out);
    Py_DECREF(alias); /* the managed tensor keeps the storage */
    return r;
}

/* ------------------------------------------------------- classification */

/* New reference: the kind (an int) of a type without the exchange API. */
static PyObject *
classify_protocol(n4p_state *st, PyTypeObject *tp)
{
    PyObject *t = (PyObject *)tp;
    long kind;
    int r;
    if (tp->tp_as_buffer != NULL && tp->tp_as_buffer->bf_getbuffer != NULL) {
        r = has_attr(t, st->str_array_interface);
        kind = r > 0 ? K_BUFFER_OR_AI : K_BUFFER;
    }
    else if ((r = has_attr(t, st->str_dlpack)) > 0)
        kind = K_DLPACK;
    else if (r == 0 && (r = has_attr(t, st->str_cai)) > 0)
        kind = K_CAI;
    else if (r == 0 && (r = has_attr(t, st->str_array_interface)) > 0)
        kind = K_ARRAY_IFACE;
    else
        kind = K_PROBE;
    if (r < 0)
        return NULL;
    return PyLong_FromLong(kind);
}

/* New reference: the cache value for tp: an int kind or the exchange
 * capsule, in a 1-tuple for a torch tensor type (its checks apply). */
static PyObject *
classify(n4p_state *st, PyTypeObject *tp)
{
    if (n4p_ndarray_classified(st, tp) < 0)
        return NULL;
    PyTypeObject *base = torch_base(tp);
    if (base != NULL) {
        if (torch_accessors(st, base) < 0)
            return NULL;
    }
    PyObject *v = NULL;
    PyObject *cap = exchange_capsule_of_type(tp);
    if (cap == NULL)
        return NULL;
    if (cap != Py_None)
        v = cap;
    else {
        Py_DECREF(cap);
        v = classify_protocol(st, tp);
    }
    if (v == NULL || base == NULL)
        return v;
    PyObject *t = PyTuple_Pack(1, v);
    Py_DECREF(v);
    return t;
}

/* A new reference to tp's freshly classified kind, entered in the cache
 * (cleared first when full), or NULL on error. */
static PyObject *
cache_kind(n4p_state *st, PyTypeObject *tp)
{
    PyObject *v = classify(st, tp);
    if (v == NULL)
        return NULL;
    if (PyDict_GET_SIZE(st->buffer_kinds) >= KIND_CACHE_MAX)
        PyDict_Clear(st->buffer_kinds);
    if (PyDict_SetItem(st->buffer_kinds, (PyObject *)tp, v) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

/* A cache entry read: its kind (*api set for the exchange kind; *torch for
 * a torch tensor type), or -1 on error. */
static int
kind_from_entry(PyObject *v, const n4p_dlexchange_api **api, int *torch)
{
    if (PyTuple_CheckExact(v)) {
        *torch = 1;
        v = PyTuple_GET_ITEM(v, 0);
    }
    if (PyLong_CheckExact(v))
        return (int)PyLong_AsLong(v);
    if ((*api = exchange_table(v)) == NULL) { /* the producer's table: static data */
        PyErr_SetString(PyExc_RuntimeError, "DLPack exchange API table vanished");
        return -1;
    }
    return 0;
}

/* The kind of tp (*api set for the exchange kind; *torch for a torch tensor
 * type), or -1 on error. */
static int
kind_of(n4p_state *st, PyTypeObject *tp, const n4p_dlexchange_api **api, int *torch)
{
    PyObject *v;
#if N4P_FREE_THREADED
    /* Threads run at once: no one-entry cache (two words no two stores can
     * change together), and a strong reference to the dict's value, which
     * another thread may drop (a cache cleared at KIND_CACHE_MAX entries, a
     * racing classification's entry).  The dict locks itself; the kinds are
     * small ints (immortal: no reference count is written). */
    int got = n4p_dict_get_ref(st->buffer_kinds, (PyObject *)tp, &v);
    if (got < 0 || (got == 0 && (v = cache_kind(st, tp)) == NULL))
        return -1;
    int kind = kind_from_entry(v, api, torch);
    Py_DECREF(v);
    return kind;
#else
    if ((PyObject *)tp == st->last_buffer_type) /* the usual case: the same type as last time */
        return kind_from_entry(st->last_buffer_kind, api, torch);
    v = PyDict_GetItemWithError(st->buffer_kinds, (PyObject *)tp);
    if (v == NULL) {
        if (PyErr_Occurred() || (v = cache_kind(st, tp)) == NULL)
            return -1;
        Py_DECREF(v); /* the dict holds it; read it before any Python code runs */
    }
    Py_XSETREF(st->last_buffer_type, Py_NewRef((PyObject *)tp));
    Py_XSETREF(st->last_buffer_kind, Py_NewRef(v));
    return kind_from_entry(v, api, torch);
#endif
}

/* Probe the instance for a protocol the type does not declare. */
static int
from_probe(const ctx_t *c, PyObject *obj, n4p_buffer *out)
{
    n4p_state *st = c->st;
    int r = has_attr(obj, st->str_dlpack);
    if (r != 0)
        return r < 0 ? -1 : from_dlpack(c, obj, out);
    PyObject *d;
    for (int cai = 1; cai >= 0; cai--) {
        r = get_optional_attr(obj, cai ? st->str_cai : st->str_array_interface, &d);
        if (r < 0)
            return -1;
        if (r > 0) {
            r = from_interface_dict(c, obj, d, cai, out);
            Py_DECREF(d);
            return r;
        }
    }
    return err_no_protocol(c, obj);
}

static int
resolve_object(const ctx_t *c, PyObject *obj, n4p_buffer *out)
{
    if (Py_TYPE(obj) == N4P_FT_LOAD(&c->st->ndarray.type) && !c->general &&
        n4p_ndarray_read(&c->st->ndarray, obj, c->writable, out))
        return 0;
    const n4p_dlexchange_api *api = NULL;
    int torch = 0;
    int kind = kind_of(c->st, Py_TYPE(obj), &api, &torch);
    if (kind < 0 || (torch && check_torch(c, obj) < 0))
        return -1;
    int r;
    switch (kind) {
    case 0: return from_exchange(c, api, obj, out);
    case K_BUFFER:
        r = from_buffer(c, obj, out);
        return r == GETBUFFER_FAILED ? -1 : r;
    case K_BUFFER_OR_AI:
        r = from_buffer(c, obj, out);
        if (r != GETBUFFER_FAILED)
            return r;
        /* e.g. "cannot include dtype 'E' in a buffer" (ml_dtypes) */
        if (!PyErr_ExceptionMatches(PyExc_ValueError) &&
            !PyErr_ExceptionMatches(PyExc_BufferError) &&
            !PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        r = from_interface(c, obj, 0, out);
        if (r == 0 && !c->general) /* an ndarray of a user-defined dtype? */
            n4p_ndarray_learn(&c->st->ndarray, obj, c->writable, out);
        return r;
    case K_DLPACK: return torch ? torch_from_dlpack(c, obj, out) : from_dlpack(c, obj, out);
    case K_CAI: return from_interface(c, obj, 1, out);
    case K_ARRAY_IFACE: return from_interface(c, obj, 0, out);
    case K_PROBE: return from_probe(c, obj, out);
    default: return -1;
    }
}

/* --------------------------------------------------------- explicit specs */

/* NCCL dtype of an explicit spec's dtype item, or -1 with an exception. */
static int
spec_dtype(const ctx_t *c, PyObject *o)
{
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    PyObject *v;
    /* a number must be an integer (__index__): never truncate 1.9 or a
     * NumPy float scalar to a dtype */
    if (PyBool_Check(o) || PyFloat_Check(o) ||
        (nb != NULL && nb->nb_index == NULL && nb->nb_int != NULL)) {
        PyErr_Format(PyExc_TypeError, "%s: the dtype of a buffer spec cannot be a %.100s",
                     c->name, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (nb != NULL && nb->nb_index != NULL)
        v = PyNumber_Index(o);
    else /* a name, a type, a dtype object: nccl._dtypes.nccl_dtype, fetched at init */
        v = PyObject_CallOneArg(c->st->dtype_parser, o);
    if (v == NULL)
        return -1;
    long d = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
    Py_DECREF(v);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (d < 0 || d >= ncclNumTypes)
        return invalid(c, "%s: %ld is not an NCCL data type (0 to %d)", c->name, d,
                       ncclNumTypes - 1);
    return (int)d;
}

static int
spec_count(const ctx_t *c, PyObject *o, size_t *count)
{
    char label[160];
    if (PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: the count of a buffer spec cannot be a bool",
                     c->name);
        return -1;
    }
    PyOS_snprintf(label, sizeof(label), "the count in the %s spec", c->name);
    return n4p_arg_size(o, label, count);
}

/* Reinterpret as dtype and/or cut to count elements. */
static int
apply_spec(const ctx_t *c, n4p_buffer *out, int dtype, int have_count, size_t count)
{
    if (dtype >= 0 && dtype != out->dtype) {
        size_t size = out->dtype == ANY_DTYPE ? 1 : n4p_dtype_size(out->dtype);
        if (out->count > SIZE_MAX / size)
            return invalid(c, "%s: the buffer is too large", c->name);
        size_t bytes = out->count * size, isz = n4p_dtype_size(dtype);
        if (bytes % isz != 0)
            return invalid(c,
                           "%s: the buffer's %zu bytes are not a whole number of %s elements "
                           "(%zu bytes each)",
                           c->name, bytes, n4p_dtype_name(dtype), isz);
        out->count = bytes / isz;
        out->dtype = dtype;
    }
    if (have_count) {
        if (count > out->count)
            return invalid(c, "%s: count %zu exceeds the buffer's %zu %s elements", c->name,
                           count, out->count, n4p_dtype_name(out->dtype));
        out->count = count;
    }
    return 0;
}

static int
resolve_spec(const ctx_t *c, PyObject *spec, n4p_buffer *out)
{
    Py_ssize_t n = PyTuple_GET_SIZE(spec);
    if (n != 2 && n != 3) {
        PyErr_Format(PyExc_TypeError,
                     "%s: an explicit buffer spec is (buffer, count), (buffer, dtype) or "
                     "(buffer, count, dtype); got a tuple of %zd items",
                     c->name, n);
        return -1;
    }
    PyObject *buf = PyTuple_GET_ITEM(spec, 0);
    PyObject *count_o, *dtype_o;
    if (n == 3) {
        count_o = PyTuple_GET_ITEM(spec, 1);
        dtype_o = PyTuple_GET_ITEM(spec, 2);
    }
    else {
        /* (buf, count) when the item is a plain integer; an int subclass
         * (an IntEnum such as nccl DataType) or any other object is a dtype */
        PyObject *o = PyTuple_GET_ITEM(spec, 1);
        int is_count = PyLong_CheckExact(o) ||
                       (!PyLong_Check(o) && Py_TYPE(o)->tp_as_number != NULL &&
                        Py_TYPE(o)->tp_as_number->nb_index != NULL);
        count_o = is_count ? o : Py_None;
        dtype_o = is_count ? Py_None : o;
    }
    if (PyTuple_Check(buf)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: the buffer of an explicit (buffer, count, dtype) spec cannot be a tuple",
                     c->name);
        return -1;
    }
    size_t count = 0;
    int dtype = -1;
    if (count_o != Py_None && spec_count(c, count_o, &count) < 0)
        return -1;
    if (dtype_o != Py_None && (dtype = spec_dtype(c, dtype_o)) < 0)
        return -1;
    ctx_t inner = *c;
    inner.any_dtype = dtype >= 0;
    if (resolve_object(&inner, buf, out) < 0)
        return -1;
    if (apply_spec(c, out, dtype, count_o != Py_None, count) < 0) {
        n4p_buffer_release(out);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ public API */

int
n4p_buffer_resolve(PyObject *mod, PyObject *obj, const char *name, int flags, n4p_buffer *out)
{
    ctx_t c = {n4p_get_state(mod), name, (flags & N4P_BUF_WRITABLE) != 0,
               (flags & N4P_BUF_AGAIN) != 0, 0, (flags & N4P_BUF_GENERAL) != 0};
    init_out(out);
    if (PyTuple_Check(obj))
        return resolve_spec(&c, obj, out);
    return resolve_object(&c, obj, out);
}

void
n4p_buffer_release(n4p_buffer *b)
{
    if (b->have_view) {
        b->have_view = 0;
        PyBuffer_Release(&b->view);
    }
    if (b->managed != NULL) {
        void *m = b->managed;
        b->managed = NULL;
        if (b->versioned)
            delete_versioned(m);
        else
            delete_legacy(m);
    }
    Py_CLEAR(b->ref);
}

PyObject *
n4p_py_resolve_buffer(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    static const char *const kw[] = {"obj", "name", "writable", "keep", "general"};
    PyObject *a[5];
    if (n4p_parse_args(args, nargs, kwnames, "resolve_buffer", kw, 1, 5, a) < 0)
        return NULL;
    const char *name = "buffer";
    if (a[1] != NULL) {
        if (!PyUnicode_Check(a[1])) {
            PyErr_SetString(PyExc_TypeError, "resolve_buffer(): name must be a str");
            return NULL;
        }
        if ((name = PyUnicode_AsUTF8(a[1])) == NULL)
            return NULL;
    }
    int writable = a[2] != NULL ? PyObject_IsTrue(a[2]) : 0;
    int keep = a[3] != NULL ? PyObject_IsTrue(a[3]) : 0;
    int general = a[4] != NULL ? PyObject_IsTrue(a[4]) : 0;
    if (writable < 0 || keep < 0 || general < 0)
        return NULL;
    n4p_buffer b;
    int flags = (writable ? N4P_BUF_WRITABLE : 0) | (general ? N4P_BUF_GENERAL : 0);
    if (n4p_buffer_resolve(mod, a[0], name, flags, &b) < 0)
        return NULL;
    PyObject *r = PyTuple_New(6);
    if (r != NULL) {
        PyObject *items[6] = {
            PyLong_FromVoidPtr(b.ptr),      PyLong_FromSize_t(b.count),
            PyLong_FromLong(b.dtype),       PyLong_FromLong(b.device_type),
            PyLong_FromLong(b.device_id),   PyBool_FromLong(b.readonly),
        };
        for (int i = 0; i < 6; i++) {
            if (items[i] == NULL)
                Py_CLEAR(r);
            if (r != NULL)
                PyTuple_SET_ITEM(r, i, items[i]);
            else
                Py_XDECREF(items[i]);
        }
    }
    if (keep && r != NULL && n4p_group_depth() > 0)
        n4p_group_keep_buffer(&b); /* the caller queues a call on it */
    n4p_buffer_release(&b);
    return r;
}

/* ------------------------------------------------------------------ init */

int
n4p_init_buffers(PyObject *Py_UNUSED(mod), n4p_state *st)
{
    st->buffer_kinds = PyDict_New();
    st->stream_kinds = PyDict_New();
    st->str_dlpack = PyUnicode_InternFromString("__dlpack__");
    st->str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    st->str_cai = PyUnicode_InternFromString("__cuda_array_interface__");
    st->str_array_interface = PyUnicode_InternFromString("__array_interface__");
    st->str_cuda_stream = PyUnicode_InternFromString("__cuda_stream__");
    st->str_lowpp = PyUnicode_InternFromString("_lowpp");
    st->dlpack_max_version = Py_BuildValue("(ii)", N4P_DLPACK_MAJOR, 1);
    PyObject *k1 = PyUnicode_InternFromString("stream");
    PyObject *k2 = PyUnicode_InternFromString("max_version");
    if (k1 != NULL && k2 != NULL)
        st->dlpack_kwnames = PyTuple_Pack(2, k1, k2);
    Py_XDECREF(k1);
    Py_XDECREF(k2);
    /* the parser of a spec's dtype (plain Python, importing only nccl._errors) */
    PyObject *m = PyImport_ImportModule("nccl._dtypes");
    if (m == NULL)
        return -1;
    st->dtype_parser = PyObject_GetAttrString(m, "nccl_dtype");
    Py_DECREF(m);
    if (st->dtype_parser == NULL || st->buffer_kinds == NULL || st->stream_kinds == NULL || st->str_dlpack == NULL ||
        st->str_dlpack_device == NULL || st->str_cai == NULL || st->str_array_interface == NULL ||
        st->str_cuda_stream == NULL || st->str_lowpp == NULL || st->dlpack_max_version == NULL ||
        st->dlpack_kwnames == NULL)
        return -1;
    return 0;
}
