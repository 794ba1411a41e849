/*
 * structs.c - Python types over the C structs of the API.
 *
 * One generic implementation serves every struct: a type is described by a
 * spec (name, size, initialiser, field table) and created at module init.
 * An object either owns the struct (storage inline in the object, so .ptr is
 * stable for the object's life) or borrows memory kept alive by `owner`.
 *
 * Common surface: .ptr and int()/index(), the buffer protocol (a 1-D byte
 * view, read-only objects export read-only views), ==, from_ptr(),
 * from_buffer(), from_bytes(), attribute access to every field with range
 * checks, and pickling as raw bytes for the value-like structs.
 */
#include "bindings.h"

#include <float.h>
#include <stddef.h>
#include <string.h>

enum { F_SIZE, F_U32, F_I32, F_U8, F_F32, F_CSTR, F_PTR, F_U64, F_BOOLS, F_U8I, F_U8X4, F_PTRX4,
       F_SUB };

/* the struct kind of each C type */
enum {
#define N4P_STRUCT(Type, PyName, KIND, picklable) N4P_TK_##Type = N4P_S_##KIND,
#define N4P_UNION(Type, PyName, KIND, picklable) N4P_TK_##Type = N4P_S_##KIND,
#include "structs.def"
};
/* the struct kind of a SUB field (its C type is a struct of the table), else -1 */
#define N4P_SUBKIND_SIZE(ctype) -1
#define N4P_SUBKIND_U32(ctype) -1
#define N4P_SUBKIND_I32(ctype) -1
#define N4P_SUBKIND_U8(ctype) -1
#define N4P_SUBKIND_F32(ctype) -1
#define N4P_SUBKIND_CSTR(ctype) -1
#define N4P_SUBKIND_PTR(ctype) -1
#define N4P_SUBKIND_U64(ctype) -1
#define N4P_SUBKIND_BOOLS(ctype) -1
#define N4P_SUBKIND_U8I(ctype) -1
#define N4P_SUBKIND_U8X4(ctype) -1
#define N4P_SUBKIND_PTRX4(ctype) -1
#define N4P_SUBKIND_SUB(ctype) N4P_TK_##ctype

typedef struct {
    const char *name;
    size_t offset;
    size_t size;
    double initial; /* what a new struct holds */
    int kind;
    int sub; /* F_SUB: the struct kind of the field */
} field_t;

/* An older layout of a struct the library fills (N4P_FIELD_BEFORE). */
typedef struct {
    int kind;
    unsigned int lo, hi;
    const char *name;
    size_t offset;
} old_field_t;

static const old_field_t old_fields[] = {
#define N4P_FIELD_BEFORE(Type, lo, hi, pyname, offset) {N4P_TK_##Type, lo, hi, #pyname, offset},
#include "structs.def"
};

typedef struct {
    const char *name;
    size_t size;
    const field_t *fields;
    int nfields;
    int picklable;
    PyGetSetDef *getset; /* built at init from fields */
    int is_union;
} spec_t;

typedef struct {
    PyObject_HEAD
    void *ptr;
    PyObject *owner;
    PyObject *refs; /* dict: pinned bytes for char* fields, by address */
    int view;       /* a SUB field's view: owner is the outer struct */
    int readonly;
    int kind;
    _Alignas(16) unsigned char storage[];
} sobj;

/* The fields of every struct (structs.def): Type_fields[]. */
#define N4P_STRUCT(Type, PyName, KIND, picklable) static const field_t Type##_fields[] = {
#define N4P_UNION N4P_STRUCT
#define N4P_FIELD(Type, ctype, cname, pyname, kind, offset, initial, api) \
    {#pyname, offsetof(Type, cname), sizeof(((Type *)0)->cname), (double)(initial), F_##kind, \
     N4P_SUBKIND_##kind(ctype)},
#define N4P_STRUCT_END(Type, size) };
#include "structs.def"

#define NF(a) (int)(sizeof(a) / sizeof((a)[0]))
static spec_t specs[N4P_S_COUNT] = {
#define N4P_STRUCT(Type, PyName, KIND, picklable) \
    [N4P_S_##KIND] = {#PyName, sizeof(Type), Type##_fields, NF(Type##_fields), picklable, NULL, 0},
#define N4P_UNION(Type, PyName, KIND, picklable) \
    [N4P_S_##KIND] = {#PyName, sizeof(Type), Type##_fields, NF(Type##_fields), picklable, NULL, 1},
#define N4P_OPAQUE(Type, PyName, KIND, picklable) \
    [N4P_S_##KIND] = {#PyName, sizeof(Type), NULL, 0, picklable, NULL, 0},
#include "structs.def"
};

/* --------------------------------------------------------------- helpers */

static void init_fields(const spec_t *sp, void *p);

/* Write field f's initial value at q (f->size bytes, zeroed before). */
static void
init_one(const field_t *f, char *q)
{
        double v = f->initial;
        switch (f->kind) {
        case F_SIZE: {
            size_t x = (size_t)v;
            memcpy(q, &x, sizeof x);
            break;
        }
        case F_U32: {
            unsigned int x = (unsigned int)v;
            memcpy(q, &x, sizeof x);
            break;
        }
        case F_I32: {
            int x = (int)v;
            memcpy(q, &x, sizeof x);
            break;
        }
        case F_U8:
            *(unsigned char *)q = (unsigned char)v;
            break;
        case F_U64: {
            uint64_t x = (uint64_t)v;
            memcpy(q, &x, sizeof x);
            break;
        }
        case F_F32: {
            float x = (float)v;
            memcpy(q, &x, sizeof x);
            break;
        }
        case F_SUB:
            init_fields(&specs[f->sub], q);
            break;
        default: /* pointers start NULL, arrays false or zero */
            break;
        }
}

/* Fill a new (zeroed) struct with its fields' initial values. */
static void
init_fields(const spec_t *sp, void *p)
{
    for (int i = 0; i < sp->nfields; i++)
        init_one(&sp->fields[i], (char *)p + sp->fields[i].offset);
}

static int
kind_of_type(PyTypeObject *tp)
{
    n4p_state *st = PyType_GetModuleState(tp);
    if (st == NULL)
        return -1;
    for (int k = 0; k < N4P_S_COUNT; k++)
        if (st->struct_types[k] == tp)
            return k;
    PyErr_SetString(PyExc_TypeError, "not an nccl4py struct type");
    return -1;
}

static sobj *
alloc_obj(PyTypeObject *tp, int kind)
{
    sobj *o = (sobj *)tp->tp_alloc(tp, 0);
    if (o == NULL)
        return NULL;
    o->kind = kind;
    o->ptr = o->storage;
    return o;
}

static PyObject *
s_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_Format(PyExc_TypeError, "%s() takes no arguments; set fields as attributes",
                     tp->tp_name);
        return NULL;
    }
    int kind = kind_of_type(tp);
    if (kind < 0)
        return NULL;
    sobj *o = alloc_obj(tp, kind);
    if (o != NULL)
        init_fields(&specs[kind], o->ptr);
    return (PyObject *)o;
}

static int
s_traverse(sobj *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->owner);
    Py_VISIT(self->refs);
    return 0;
}

static int
s_clear(sobj *self)
{
    Py_CLEAR(self->owner);
    Py_CLEAR(self->refs);
    return 0;
}

static void
s_dealloc(sobj *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    s_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------ library layouts */

enum { L_NCCL, L_RCCL };

typedef struct {
    int kind, family;
    unsigned int since;
    size_t size, known;
} layout_t;

static const layout_t layouts[] = {
#define N4P_LAYOUT(Type, family, since, size, known) \
    {N4P_TK_##Type, L_##family, since, size, known},
#include "structs.def"
};

/* The version code of the loaded library (asked once: it loads once). */
static int
library_version(PyObject *mod, unsigned int *out)
{
    static int cached = -1; /* threads that race here store the same value */
    if (N4P_FT_LOAD(&cached) < 0) {
        ncclGetVersion_fn fn = (ncclGetVersion_fn)n4p_fn(mod, N4P_IDX_ncclGetVersion);
        if (fn == NULL)
            return -1;
        int v = 0;
        ncclResult_t r;
        Py_BEGIN_ALLOW_THREADS
        r = fn(&v);
        Py_END_ALLOW_THREADS
        if (r != ncclSuccess) {
            n4p_raise_status(mod, r);
            return -1;
        }
        N4P_FT_STORE(&cached, v < 0 ? 0 : v);
    }
    *out = (unsigned int)N4P_FT_LOAD(&cached);
    return 0;
}

int
n4p_struct_for_library(PyObject *mod, int kind, int input, void **p, void *tmp)
{
    if (*p == NULL)
        return 0;
    int any = 0;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        any |= layouts[i].kind == kind;
    if (!any)
        return 0;
    unsigned int version;
    if (library_version(mod, &version) < 0)
        return -1;
    int family = n4p_library_kind == N4P_LIB_RCCL ? L_RCCL : L_NCCL;
    const layout_t *L = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0] && L == NULL; i++)
        if (layouts[i].kind == kind && layouts[i].family == family && version >= layouts[i].since)
            L = &layouts[i];
    if (L == NULL) /* older than every layout we know: as it is */
        return 0;
    const spec_t *sp = &specs[kind];
    size_t size;
    unsigned int magic;
    memcpy(&size, *p, sizeof size);
    memcpy(&magic, (const char *)*p + sizeof size, sizeof magic);
    if (magic != NCCL_API_MAGIC) /* not a struct we can read: the library says why */
        return 0;
    unsigned int stamp = version < NCCL4PY_ABI_VERSION_CODE ? version : NCCL4PY_ABI_VERSION_CODE;
    unsigned int own;
    memcpy(&own, (const char *)*p + sizeof size + sizeof magic, sizeof own);
    const field_t *last = &sp->fields[sp->nfields - 1]; /* the fields are in offset order */
    if (last->offset + last->size <= L->known && L->size == sp->size && size == L->size &&
        own == stamp)
        return 0; /* the library's layout is ours, and the struct says so: as it is */
    memset(tmp, 0, sp->size);
    init_fields(sp, tmp);
    memcpy(tmp, *p, size < sp->size ? size : sp->size);
    for (int i = 0; input && i < sp->nfields; i++) {
        const field_t *f = &sp->fields[i];
        unsigned char ref[N4P_BOOLS_LEN] = {0};
        init_one(f, (char *)ref);
        if (f->offset + f->size <= L->known || memcmp((char *)tmp + f->offset, ref, f->size) == 0)
            continue;
        PyErr_Format(n4p_get_state(mod)->nccl_invalid,
                     "%s.%s is set, but the loaded %s %u.%u.%u does not know it (its %s has "
                     "%zu bytes); leave it unset or load a newer library",
                     sp->name, f->name, family == L_RCCL ? "RCCL" : "NCCL", version / 10000,
                     version / 100 % 100, version % 100, sp->name, L->known);
        return -1;
    }
    size = L->size;
    memcpy(tmp, &size, sizeof size);
    memcpy((char *)tmp + sizeof size + sizeof magic, &stamp, sizeof stamp);
    *p = tmp;
    return 1;
}

void
n4p_struct_from_library(int kind, const void *tmp, void *orig)
{
    size_t size, hdr = sizeof(size_t) + 2 * sizeof(unsigned int);
    memcpy(&size, orig, sizeof size);
    if (size > specs[kind].size)
        size = specs[kind].size;
    if (size > hdr)
        memcpy((char *)orig + hdr, (const char *)tmp + hdr, size - hdr);
}

/* ---------------------------------------------------------------- fields */

/* Where field f is in self: its offset in the layout the struct's version
 * field names (N4P_FIELD_BEFORE), 1; 0 when that layout lacks it; -1 with
 * NcclInvalid for a version below every layout we know. */
static int
field_offset(const sobj *self, const field_t *f, size_t *off)
{
    *off = f->offset;
    const spec_t *sp = &specs[self->kind];
    unsigned int top = 0;
    for (size_t i = 0; i < sizeof old_fields / sizeof old_fields[0]; i++)
        if (old_fields[i].kind == self->kind && old_fields[i].hi > top)
            top = old_fields[i].hi;
    if (top == 0)
        return 1;
    unsigned int version = 0;
    for (int i = 0; i < sp->nfields; i++)
        if (strcmp(sp->fields[i].name, "version") == 0)
            memcpy(&version, (const char *)self->ptr + sp->fields[i].offset, sizeof version);
    if (version == 0 || version >= top) /* not filled yet, or the current layout */
        return 1;
    int known = 0;
    for (size_t i = 0; i < sizeof old_fields / sizeof old_fields[0]; i++) {
        const old_field_t *o = &old_fields[i];
        if (o->kind != self->kind || version < o->lo || version >= o->hi)
            continue;
        known = 1;
        if (strcmp(o->name, f->name) == 0) {
            *off = o->offset;
            return 1;
        }
    }
    if (known)
        return 0;
    PyErr_Format(n4p_get_state(PyType_GetModule(Py_TYPE(self)))->nccl_invalid,
                 "this %s was written in the layout of version %u, which nccl4py cannot read",
                 sp->name, version);
    return -1;
}

/* The struct that holds the pinned strings of self (the outermost one). */
static sobj *
pin_root(sobj *self)
{
    while (self->view)
        self = (sobj *)self->owner;
    return self;
}

/* Whether the string pointer at p is one this object set (for a union's
 * string member, whose bytes may hold another member). */
static int
pinned_here(sobj *self, const char *p, const char *s)
{
    sobj *root = pin_root(self);
    PyObject *key = root->refs ? PyLong_FromVoidPtr((void *)p) : NULL;
    PyObject *b = key ? PyDict_GetItemWithError(root->refs, key) : NULL;
    Py_XDECREF(key);
    PyErr_Clear();
    return b != NULL && PyBytes_Check(b) && PyBytes_AS_STRING(b) == s;
}

static PyObject *
int_tuple(const char *p, size_t n, size_t width)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t != NULL && i < n; i++) {
        PyObject *v;
        if (width == 1) {
            v = PyLong_FromLong(((const unsigned char *)p)[i]);
        } else {
            void *x;
            memcpy(&x, p + i * sizeof x, sizeof x);
            v = PyLong_FromVoidPtr(x);
        }
        if (v == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
    }
    return t;
}

static PyObject *
field_get(sobj *self, void *closure)
{
    const field_t *f = closure;
    size_t off;
    int at = field_offset(self, f, &off);
    if (at <= 0) {
        if (at < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    const char *p = (const char *)self->ptr + off;
    switch (f->kind) {
    case F_U8I:
        return PyLong_FromLong(*(const unsigned char *)p);
    case F_U8X4:
        return int_tuple(p, f->size, 1);
    case F_PTRX4:
        return int_tuple(p, f->size / sizeof(void *), sizeof(void *));
    case F_SUB: {
        /* a view of the inner struct that keeps this one alive */
        PyTypeObject *tp = n4p_get_state(PyType_GetModule(Py_TYPE(self)))->struct_types[f->sub];
        sobj *o = alloc_obj(tp, f->sub);
        if (o == NULL)
            return NULL;
        o->ptr = (void *)p;
        o->owner = Py_NewRef((PyObject *)self);
        o->readonly = self->readonly;
        o->view = 1;
        return (PyObject *)o;
    }
    case F_SIZE: {
        size_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromSize_t(v);
    }
    case F_U32: {
        unsigned int v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromUnsignedLong(v);
    }
    case F_I32: {
        int v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromLong(v);
    }
    case F_U8:
        return PyBool_FromLong(*(const unsigned char *)p != 0);
    case F_U64: {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromUnsignedLongLong((unsigned long long)v);
    }
    case F_BOOLS: {
        PyObject *t = PyTuple_New((Py_ssize_t)f->size);
        if (t == NULL)
            return NULL;
        for (size_t i = 0; i < f->size; i++)
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, PyBool_FromLong(((const unsigned char *)p)[i] != 0));
        return t;
    }
    case F_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(v);
    }
    case F_CSTR: {
        const char *s;
        memcpy(&s, p, sizeof s);
        /* a union's bytes may hold another member: only a string set here is read */
        if (specs[self->kind].is_union && s != NULL && !pinned_here(self, p, s))
            Py_RETURN_NONE;
        return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0, "replace");
    }
    case F_PTR: {
        void *v;
        memcpy(&v, p, sizeof v);
        return PyLong_FromVoidPtr(v);
    }
    }
    Py_RETURN_NONE;
}

static int
field_set(sobj *self, PyObject *value, void *closure)
{
    const field_t *f = closure;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete field %s", f->name);
        return -1;
    }
    if (self->readonly) {
        PyErr_Format(PyExc_ValueError, "This %s instance is read-only", specs[self->kind].name);
        return -1;
    }
    size_t off;
    int at = field_offset(self, f, &off);
    if (at <= 0) {
        if (at == 0)
            PyErr_Format(PyExc_AttributeError, "this %s's layout has no field %s",
                         specs[self->kind].name, f->name);
        return -1;
    }
    char *p = (char *)self->ptr + off;
    switch (f->kind) {
    case F_U8X4:
    case F_PTRX4: {
        size_t width = f->kind == F_U8X4 ? 1 : sizeof(void *), n = f->size / width;
        PyObject *seq = PySequence_Fast(value, "");
        if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != (Py_ssize_t)n) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a sequence of %zu ints", f->name, n);
            return -1;
        }
        unsigned char tmp[4 * sizeof(void *)] = {0};
        for (size_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
            int rc;
            if (width == 1) {
                int v = 0;
                rc = n4p_arg_int(item, f->name, &v);
                if (rc == 0 && (v < 0 || v > 255)) {
                    PyErr_Format(PyExc_OverflowError, "%s must hold ints in 0..255", f->name);
                    rc = -1;
                }
                tmp[i] = (unsigned char)v;
            } else {
                void *v = NULL;
                rc = n4p_arg_ptr(item, f->name, &v);
                memcpy(tmp + i * width, &v, width);
            }
            if (rc < 0) {
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
        memcpy(p, tmp, f->size);
        return 0;
    }
    case F_SUB: {
        n4p_state *st = n4p_get_state(PyType_GetModule(Py_TYPE(self)));
        if (Py_TYPE(value) != st->struct_types[f->sub]) {
            PyErr_Format(PyExc_TypeError, "%s must be a %s", f->name, specs[f->sub].name);
            return -1;
        }
        memmove(p, ((sobj *)value)->ptr, f->size);
        return 0;
    }
    case F_SIZE: {
        size_t v;
        if (n4p_arg_size(value, f->name, &v) < 0)
            return -1;
        memcpy(p, &v, sizeof v);
        return 0;
    }
    case F_U32: {
        unsigned int v;
        if (n4p_arg_uint(value, f->name, &v) < 0)
            return -1;
        memcpy(p, &v, sizeof v);
        return 0;
    }
    case F_I32: {
        int v;
        if (n4p_arg_int(value, f->name, &v) < 0)
            return -1;
        memcpy(p, &v, sizeof v);
        return 0;
    }
    case F_U8:
    case F_U8I: {
        int v;
        if (n4p_arg_int(value, f->name, &v) < 0)
            return -1;
        if (v < 0 || v > 255) {
            PyErr_Format(PyExc_OverflowError, "%s must be in 0..255", f->name);
            return -1;
        }
        *(unsigned char *)p = (unsigned char)v;
        return 0;
    }
    case F_U64: {
        unsigned long long v = PyLong_Check(value) ? PyLong_AsUnsignedLongLong(value) : 0;
        if (!PyLong_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int", f->name);
            return -1;
        }
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_OverflowError, "%s must be in 0..2**64-1", f->name);
            return -1;
        }
        uint64_t x = (uint64_t)v;
        memcpy(p, &x, sizeof x);
        return 0;
    }
    case F_BOOLS: {
        PyObject *seq = PySequence_Fast(value, "");
        if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != (Py_ssize_t)f->size) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be a sequence of %zu bools", f->name, f->size);
            return -1;
        }
        unsigned char tmp[N4P_BOOLS_LEN] = {0};
        size_t len = f->size < sizeof tmp ? f->size : sizeof tmp;
        for (size_t i = 0; i < len; i++) {
            int b = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
            if (b < 0) {
                Py_DECREF(seq);
                return -1;
            }
            tmp[i] = (unsigned char)b;
        }
        Py_DECREF(seq);
        memcpy(p, tmp, len);
        return 0;
    }
    case F_F32: {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        float v = (float)d;
        memcpy(p, &v, sizeof v);
        return 0;
    }
    case F_CSTR: {
        const char *s = NULL;
        PyObject *pinned = Py_NewRef(Py_None);
        if (value != Py_None) {
            if (!PyUnicode_Check(value)) {
                Py_DECREF(pinned);
                PyErr_Format(PyExc_TypeError, "%s must be a str or None", f->name);
                return -1;
            }
            Py_SETREF(pinned, PyUnicode_AsUTF8String(value));
            if (pinned == NULL)
                return -1;
            s = PyBytes_AS_STRING(pinned);
        }
        /* the bytes object stays alive as long as the struct points at it:
         * pinned on the outermost struct (a view of a field is temporary) */
        sobj *root = pin_root(self);
        PyObject *key = PyLong_FromVoidPtr(p);
        if (key == NULL || (root->refs == NULL && (root->refs = PyDict_New()) == NULL)) {
            Py_XDECREF(key);
            Py_DECREF(pinned);
            return -1;
        }
        int rc = PyDict_SetItem(root->refs, key, pinned);
        Py_DECREF(key);
        Py_DECREF(pinned);
        if (rc < 0)
            return -1;
        memcpy(p, &s, sizeof s);
        return 0;
    }
    case F_PTR: {
        void *v;
        if (n4p_arg_ptr(value, f->name, &v) < 0)
            return -1;
        memcpy(p, &v, sizeof v);
        return 0;
    }
    }
    return 0;
}

/* ------------------------------------------------------------- protocols */

static int
s_getbuffer(sobj *self, Py_buffer *view, int flags)
{
    if ((flags & PyBUF_WRITABLE) && self->readonly) {
        PyErr_Format(PyExc_BufferError, "This %s instance is read-only", specs[self->kind].name);
        view->obj = NULL;
        return -1;
    }
    return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr,
                             (Py_ssize_t)specs[self->kind].size, self->readonly, flags);
}

static PyObject *
s_int(sobj *self)
{
    return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *
s_get_ptr(sobj *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *
s_richcompare(sobj *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(other) != Py_TYPE(self))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = memcmp(self->ptr, ((sobj *)other)->ptr, specs[self->kind].size) == 0;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *
s_repr(sobj *self)
{
    const spec_t *sp = &specs[self->kind];
    if (sp->nfields == 0) {
        const unsigned char *b = self->ptr;
        char hex[33];
        for (size_t i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", b[i]);
        return PyUnicode_FromFormat("<%s %s... (%zu bytes) at %p>", sp->name, hex, sp->size,
                                    self->ptr);
    }
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    for (int i = 0; i < sp->nfields; i++) {
        PyObject *v = field_get(self, (void *)&sp->fields[i]);
        PyObject *s = v ? PyUnicode_FromFormat("%s=%R", sp->fields[i].name, v) : NULL;
        Py_XDECREF(v);
        if (s == NULL || PyList_Append(parts, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(parts);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *body = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(parts);
    if (body == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s(%U)", sp->name, body);
    Py_DECREF(body);
    return r;
}

/* --------------------------------------------------------- constructors */

static PyObject *
s_from_ptr(PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const kw[] = {"ptr", "readonly", "owner", NULL};
    PyObject *a[3];
    if (n4p_parse_args(args, nargs, kwnames, "from_ptr", kw, 1, 3, a) < 0)
        return NULL;
    int kind = kind_of_type(cls);
    if (kind < 0)
        return NULL;
    void *p;
    if (n4p_arg_ptr(a[0], "ptr", &p) < 0)
        return NULL;
    if (p == NULL) {
        PyErr_SetString(PyExc_ValueError, "ptr must not be null (0)");
        return NULL;
    }
    int readonly = a[1] ? PyObject_IsTrue(a[1]) : 0;
    if (readonly < 0)
        return NULL;
    sobj *o = alloc_obj(cls, kind);
    if (o == NULL)
        return NULL;
    if (a[2] == NULL || a[2] == Py_None) {
        memcpy(o->storage, p, specs[kind].size);
    } else {
        o->ptr = p;
        o->owner = Py_NewRef(a[2]);
    }
    o->readonly = readonly;
    return (PyObject *)o;
}

static PyObject *
s_from_buffer(PyTypeObject *cls, PyObject *buf)
{
    int kind = kind_of_type(cls);
    if (kind < 0)
        return NULL;
    if (!PyObject_CheckBuffer(buf)) {
        PyErr_SetString(PyExc_TypeError, "buffer argument does not support the buffer protocol");
        return NULL;
    }
    /* a memoryview holds the export, so the memory can't move or vanish */
    PyObject *mv = PyMemoryView_FromObject(buf);
    if (mv == NULL)
        return NULL;
    Py_buffer *v = PyMemoryView_GET_BUFFER(mv);
    if (!PyBuffer_IsContiguous(v, 'A')) {
        Py_DECREF(mv);
        PyErr_SetString(PyExc_ValueError, "buffer must be contiguous");
        return NULL;
    }
    if (v->len != (Py_ssize_t)specs[kind].size) {
        Py_DECREF(mv);
        PyErr_Format(PyExc_ValueError, "buffer length must be %zu bytes", specs[kind].size);
        return NULL;
    }
    sobj *o = alloc_obj(cls, kind);
    if (o == NULL) {
        Py_DECREF(mv);
        return NULL;
    }
    o->ptr = v->buf;
    o->readonly = v->readonly;
    o->owner = mv;
    return (PyObject *)o;
}

static PyObject *
s_from_bytes(PyTypeObject *cls, PyObject *b)
{
    int kind = kind_of_type(cls);
    if (kind < 0)
        return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(b, &v, PyBUF_ANY_CONTIGUOUS) < 0)
        return NULL;
    if (v.len != (Py_ssize_t)specs[kind].size) {
        PyErr_Format(PyExc_ValueError, "%s needs exactly %zu bytes, got %zd", specs[kind].name,
                     specs[kind].size, v.len);
        PyBuffer_Release(&v);
        return NULL;
    }
    sobj *o = alloc_obj(cls, kind);
    if (o != NULL)
        memcpy(o->storage, v.buf, specs[kind].size);
    PyBuffer_Release(&v);
    return (PyObject *)o;
}

static PyObject *
s_reduce(sobj *self, PyObject *Py_UNUSED(ignored))
{
    const spec_t *sp = &specs[self->kind];
    if (!sp->picklable) {
        /* structs that hold pointers or library state can't travel */
        PyObject *pickle = PyImport_ImportModule("pickle");
        if (pickle != NULL) {
            PyObject *err = PyObject_GetAttrString(pickle, "PicklingError");
            if (err != NULL)
                PyErr_Format(err, "Pickle not supported for %s", sp->name);
            Py_XDECREF(err);
            Py_DECREF(pickle);
        }
        return NULL;
    }
    PyObject *ctor = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "from_bytes");
    if (ctor == NULL)
        return NULL;
    return Py_BuildValue("N(y#)", ctor, (const char *)self->ptr, (Py_ssize_t)sp->size);
}

static PyMethodDef s_methods[] = {
    {"from_ptr", (PyCFunction)(void (*)(void))s_from_ptr,
     METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_ptr(ptr, readonly=False, owner=None)\n--\n\nWrap the struct at address ptr: "
     "copied when owner is None, else borrowed and owner kept alive."},
    {"from_buffer", (PyCFunction)s_from_buffer, METH_O | METH_CLASS,
     "Wrap a buffer of exactly sizeof(struct) bytes without copying."},
    {"from_data", (PyCFunction)s_from_buffer, METH_O | METH_CLASS,
     "Wrap an array of the struct's dtype (one record, exactly sizeof(struct) bytes) "
     "without copying."},
    {"from_bytes", (PyCFunction)s_from_bytes, METH_O | METH_CLASS,
     "A new owned struct copied from exactly sizeof(struct) bytes."},
    {"__reduce__", (PyCFunction)s_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ module API */

static PyObject *
s_get_nbytes(sobj *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(specs[self->kind].size);
}

static PyObject *
s_get_readonly(sobj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->readonly);
}

static PyGetSetDef *
build_getset(spec_t *sp)
{
    PyGetSetDef *gs = PyMem_Calloc((size_t)sp->nfields + 4, sizeof *gs);
    if (gs == NULL)
        return NULL;
    int i = 0;
    gs[i++] = (PyGetSetDef){"ptr", (getter)s_get_ptr, NULL, "address of the C struct", NULL};
    gs[i++] = (PyGetSetDef){"nbytes", (getter)s_get_nbytes, NULL, "sizeof the C struct", NULL};
    gs[i++] = (PyGetSetDef){"readonly", (getter)s_get_readonly, NULL, NULL, NULL};
    for (int f = 0; f < sp->nfields; f++)
        gs[i++] = (PyGetSetDef){sp->fields[f].name, (getter)field_get, (setter)field_set, NULL,
                                (void *)&sp->fields[f]};
    return gs;
}

int
n4p_init_structs(PyObject *mod, n4p_state *st)
{
    for (int k = 0; k < N4P_S_COUNT; k++) {
        spec_t *sp = &specs[k];
        if (sp->getset == NULL && (sp->getset = build_getset(sp)) == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyType_Slot slots[] = {
            {Py_tp_new, s_new},
            {Py_tp_dealloc, s_dealloc},
            {Py_tp_traverse, s_traverse},
            {Py_tp_clear, s_clear},
            {Py_tp_getset, sp->getset},
            {Py_tp_methods, s_methods},
            {Py_tp_richcompare, s_richcompare},
            {Py_tp_repr, s_repr},
            {Py_nb_int, s_int},
            {Py_bf_getbuffer, s_getbuffer},
            {0, NULL},
        };
        char qualname[96];
        snprintf(qualname, sizeof qualname, "nccl.bindings.%s", sp->name);
        PyType_Spec spec = {
            .name = qualname,
            .basicsize = (int)(offsetof(sobj, storage) + ((sp->size + 15) & ~(size_t)15)),
            .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
            .slots = slots,
        };
        PyObject *tp = PyType_FromModuleAndSpec(mod, &spec, NULL);
        if (tp == NULL)
            return -1;
        st->struct_types[k] = (PyTypeObject *)tp;
        if (PyModule_AddObjectRef(mod, sp->name, tp) < 0)
            return -1;
    }
    return 0;
}

PyObject *
n4p_struct_new(n4p_state *st, int kind)
{
    sobj *o = alloc_obj(st->struct_types[kind], kind);
    if (o != NULL)
        init_fields(&specs[kind], o->ptr);
    return (PyObject *)o;
}

void *
n4p_struct_ptr(n4p_state *st, int kind, PyObject *o)
{
    if (Py_TYPE(o) != st->struct_types[kind])
        return NULL;
    return ((sobj *)o)->ptr;
}

PyObject *
n4p_struct_copy(n4p_state *st, int kind, const void *src)
{
    PyObject *o = n4p_struct_new(st, kind);
    if (o != NULL)
        memcpy(((sobj *)o)->ptr, src, specs[kind].size);
    return o;
}

int
n4p_arg_struct(n4p_state *st, int kind, PyObject *o, const char *name, int allow_null, void **out)
{
    void *p = n4p_struct_ptr(st, kind, o);
    if (p != NULL) {
        *out = p;
        return 0;
    }
    if (o == Py_None && allow_null) {
        *out = NULL;
        return 0;
    }
    for (int k = 0; k < N4P_S_COUNT; k++) {
        if (Py_TYPE(o) == st->struct_types[k]) {
            PyErr_Format(PyExc_TypeError, "%s must be a %s or an int address, not %s", name,
                         specs[kind].name, specs[k].name);
            return -1;
        }
    }
    if (n4p_arg_ptr(o, name, out) < 0)
        return -1;
    if (*out == NULL && !allow_null) {
        PyErr_Format(PyExc_ValueError, "%s must not be a null address", name);
        return -1;
    }
    return 0;
}

/* The struct kind o stands for: a struct object's own, else that of its
 * _lowpp (nccl.core's configuration objects); -1 for neither, -2 with an
 * exception. */
static int
stands_for(n4p_state *st, PyObject *o, int *via_lowpp)
{
    *via_lowpp = 0;
    for (int k = 0; k < N4P_S_COUNT; k++)
        if (Py_TYPE(o) == st->struct_types[k])
            return k;
    PyObject *low = PyObject_GetAttr(o, st->str_lowpp);
    if (low == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -2;
        PyErr_Clear();
        return -1;
    }
    int kind = -1;
    for (int k = 0; k < N4P_S_COUNT && kind < 0; k++)
        if (Py_TYPE(low) == st->struct_types[k])
            kind = k;
    Py_DECREF(low);
    *via_lowpp = kind >= 0;
    return kind;
}

int
n4p_arg_struct_addr(n4p_state *st, int kind, PyObject *o, const char *name, int allow_null,
                    void **out)
{
    void *p = n4p_struct_ptr(st, kind, o);
    if (p != NULL) {
        *out = p;
        return 0;
    }
    if (o != Py_None && !PyLong_Check(o)) {
        int via, k = stands_for(st, o, &via);
        if (k == -2)
            return -1;
        if (k >= 0 && k != kind) {
            PyErr_Format(PyExc_TypeError,
                         "%s must be a %s, an object with an int .ptr or an int address, not "
                         "%s%s%s%s",
                         name, specs[kind].name, via ? Py_TYPE(o)->tp_name : "a ",
                         via ? " (a " : "", specs[k].name, via ? ")" : "");
            return -1;
        }
    }
    return allow_null ? n4p_arg_addr_opt(o, name, out) : n4p_arg_addr(o, name, out);
}

/* {name: (sizeof, [(field, offset, kind-letter)])} for the NumPy dtypes
 * ("?N": an array of N bools, "u1x4" / "px4": 4 uint8 / addresses, "SName":
 * the struct Name). */
PyObject *
n4p_struct_layouts(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    static const char *codes[] = {[F_SIZE] = "u8", [F_U32] = "u4", [F_I32] = "i4",
                                  [F_U8] = "u1", [F_F32] = "f4", [F_CSTR] = "p",
                                  [F_PTR] = "p", [F_U64] = "u8", [F_BOOLS] = "?",
                                  [F_U8I] = "u1", [F_U8X4] = "u1x4", [F_PTRX4] = "px4"};
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int k = 0; k < N4P_S_COUNT; k++) {
        const spec_t *sp = &specs[k];
        PyObject *fields = PyList_New(sp->nfields);
        if (fields == NULL)
            goto fail;
        for (int i = 0; i < sp->nfields; i++) {
            const field_t *f = &sp->fields[i];
            PyObject *code = f->kind == F_BOOLS ? PyUnicode_FromFormat("?%zu", f->size)
                             : f->kind == F_SUB ? PyUnicode_FromFormat("S%s", specs[f->sub].name)
                                                : PyUnicode_FromString(codes[f->kind]);
            PyObject *t = code ? Py_BuildValue("(snN)", f->name, (Py_ssize_t)f->offset, code) : NULL;
            if (t == NULL) {
                Py_DECREF(fields);
                goto fail;
            }
            PyList_SET_ITEM(fields, i, t);
        }
        PyObject *v = Py_BuildValue("(nN)", (Py_ssize_t)sp->size, fields);
        if (v == NULL || PyDict_SetItemString(d, sp->name, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}
