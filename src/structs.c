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

enum { F_SIZE, F_U32, F_I32, F_U8, F_F32, F_CSTR, F_PTR };

typedef struct {
    const char *name;
    size_t offset;
    int kind;
} field_t;

typedef struct {
    const char *name;
    size_t size;
    const field_t *fields;
    int nfields;
    int picklable;
    void (*init)(void *p);
    PyGetSetDef *getset; /* built at init from fields */
} spec_t;

typedef struct {
    PyObject_HEAD
    void *ptr;
    PyObject *owner;
    PyObject *refs; /* dict: pinned bytes for char* fields */
    int readonly;
    int kind;
    _Alignas(16) unsigned char storage[];
} sobj;

#define FIELD(T, pyname, cname, k) {pyname, offsetof(T, cname), k}

static const field_t config_fields[] = {
    FIELD(ncclConfig_t, "size_", size, F_SIZE),
    FIELD(ncclConfig_t, "magic", magic, F_U32),
    FIELD(ncclConfig_t, "version", version, F_U32),
    FIELD(ncclConfig_t, "blocking", blocking, F_I32),
    FIELD(ncclConfig_t, "cga_cluster_size", cgaClusterSize, F_I32),
    FIELD(ncclConfig_t, "min_ctas", minCTAs, F_I32),
    FIELD(ncclConfig_t, "max_ctas", maxCTAs, F_I32),
    FIELD(ncclConfig_t, "net_name", netName, F_CSTR),
    FIELD(ncclConfig_t, "split_share", splitShare, F_I32),
    FIELD(ncclConfig_t, "traffic_class", trafficClass, F_I32),
    FIELD(ncclConfig_t, "comm_name", commName, F_CSTR),
    FIELD(ncclConfig_t, "collnet_enable", collnetEnable, F_I32),
    FIELD(ncclConfig_t, "cta_policy", CTAPolicy, F_I32),
    FIELD(ncclConfig_t, "shrink_share", shrinkShare, F_I32),
    FIELD(ncclConfig_t, "nvls_ctas", nvlsCTAs, F_I32),
    FIELD(ncclConfig_t, "n_channels_per_net_peer", nChannelsPerNetPeer, F_I32),
    FIELD(ncclConfig_t, "nvlink_centric_sched", nvlinkCentricSched, F_I32),
    FIELD(ncclConfig_t, "graph_usage_mode", graphUsageMode, F_I32),
    FIELD(ncclConfig_t, "num_rma_ctx", numRmaCtx, F_I32),
    FIELD(ncclConfig_t, "max_p2p_peers", maxP2pPeers, F_I32),
};

static const field_t sim_info_fields[] = {
    FIELD(ncclSimInfo_t, "size_", size, F_SIZE),
    FIELD(ncclSimInfo_t, "magic", magic, F_U32),
    FIELD(ncclSimInfo_t, "version", version, F_U32),
    FIELD(ncclSimInfo_t, "estimated_time", estimatedTime, F_F32),
};

static const field_t comm_properties_fields[] = {
    FIELD(ncclCommProperties_t, "size_", size, F_SIZE),
    FIELD(ncclCommProperties_t, "magic", magic, F_U32),
    FIELD(ncclCommProperties_t, "version", version, F_U32),
    FIELD(ncclCommProperties_t, "rank", rank, F_I32),
    FIELD(ncclCommProperties_t, "n_ranks", nRanks, F_I32),
    FIELD(ncclCommProperties_t, "cuda_dev", cudaDev, F_I32),
    FIELD(ncclCommProperties_t, "nvml_dev", nvmlDev, F_I32),
    FIELD(ncclCommProperties_t, "device_api_support", deviceApiSupport, F_U8),
    FIELD(ncclCommProperties_t, "multimem_support", multimemSupport, F_U8),
    FIELD(ncclCommProperties_t, "gin_type", ginType, F_I32),
    FIELD(ncclCommProperties_t, "n_lsa_teams", nLsaTeams, F_I32),
    FIELD(ncclCommProperties_t, "host_rma_support", hostRmaSupport, F_U8),
    FIELD(ncclCommProperties_t, "railed_gin_type", railedGinType, F_I32),
};

static const field_t wait_signal_desc_fields[] = {
    FIELD(ncclWaitSignalDesc_t, "op_cnt", opCnt, F_I32),
    FIELD(ncclWaitSignalDesc_t, "peer", peer, F_I32),
    FIELD(ncclWaitSignalDesc_t, "sig_idx", sigIdx, F_I32),
    FIELD(ncclWaitSignalDesc_t, "ctx", ctx, F_I32),
};

static const field_t dev_comm_requirements_fields[] = {
    FIELD(ncclDevCommRequirements_t, "size_", size, F_SIZE),
    FIELD(ncclDevCommRequirements_t, "magic", magic, F_U32),
    FIELD(ncclDevCommRequirements_t, "version", version, F_U32),
    FIELD(ncclDevCommRequirements_t, "resource_requirements_list", resourceRequirementsList, F_PTR),
    FIELD(ncclDevCommRequirements_t, "team_requirements_list", teamRequirementsList, F_PTR),
    FIELD(ncclDevCommRequirements_t, "lsa_multimem", lsaMultimem, F_U8),
    FIELD(ncclDevCommRequirements_t, "barrier_count", barrierCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "lsa_barrier_count", lsaBarrierCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "rail_gin_barrier_count", railGinBarrierCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "lsa_ll_a2a_block_count", lsaLLA2ABlockCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "lsa_ll_a2a_slot_count", lsaLLA2ASlotCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_force_enable", ginForceEnable, F_U8),
    FIELD(ncclDevCommRequirements_t, "gin_context_count", ginContextCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_signal_count", ginSignalCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_counter_count", ginCounterCount, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_connection_type", ginConnectionType, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_exclusive_contexts", ginExclusiveContexts, F_U8),
    FIELD(ncclDevCommRequirements_t, "gin_queue_depth", ginQueueDepth, F_I32),
    FIELD(ncclDevCommRequirements_t, "gin_traffic_class", ginTrafficClass, F_I32),
    FIELD(ncclDevCommRequirements_t, "world_gin_barrier_count", worldGinBarrierCount, F_I32),
};

static void
init_config(void *p)
{
    ncclConfig_t *c = p;
    c->size = sizeof *c;
    c->magic = NCCL_API_MAGIC;
    c->version = NCCL4PY_ABI_VERSION_CODE;
    int *ints[] = {&c->blocking, &c->cgaClusterSize, &c->minCTAs, &c->maxCTAs, &c->splitShare,
                   &c->trafficClass, &c->collnetEnable, &c->CTAPolicy, &c->shrinkShare,
                   &c->nvlsCTAs, &c->nChannelsPerNetPeer, &c->nvlinkCentricSched,
                   &c->graphUsageMode, &c->numRmaCtx, &c->maxP2pPeers};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        *ints[i] = NCCL_CONFIG_UNDEF_INT;
    c->netName = NULL;
    c->commName = NULL;
}

static void
init_sim_info(void *p)
{
    ncclSimInfo_t *s = p;
    s->size = sizeof *s;
    s->magic = NCCL_SIM_INFO_MAGIC;
    s->version = NCCL4PY_ABI_VERSION_CODE;
    s->estimatedTime = NCCL_UNDEF_FLOAT;
}

static void
init_comm_properties(void *p)
{
    ncclCommProperties_t *s = p;
    s->size = sizeof *s;
    s->magic = NCCL_API_MAGIC;
    s->version = NCCL4PY_ABI_VERSION_CODE;
}

static void
init_dev_comm_requirements(void *p)
{
    ncclDevCommRequirements_t *r = p;
    r->size = sizeof *r;
    r->magic = NCCL_API_MAGIC;
    r->version = NCCL4PY_ABI_VERSION_CODE;
    r->ginContextCount = 4;
    r->ginConnectionType = NCCL_GIN_CONNECTION_NONE;
    r->ginTrafficClass = NCCL_CONFIG_UNDEF_INT;
}

#define NF(a) (int)(sizeof(a) / sizeof((a)[0]))
static spec_t specs[N4P_S_COUNT] = {
    [N4P_S_UNIQUE_ID] = {"UniqueId", sizeof(ncclUniqueId), NULL, 0, 1, NULL, NULL},
    [N4P_S_CONFIG] = {"Config", sizeof(ncclConfig_t), config_fields, NF(config_fields), 0,
                      init_config, NULL},
    [N4P_S_SIM_INFO] = {"SimInfo", sizeof(ncclSimInfo_t), sim_info_fields, NF(sim_info_fields),
                        1, init_sim_info, NULL},
    [N4P_S_COMM_PROPERTIES] = {"CommProperties", sizeof(ncclCommProperties_t),
                               comm_properties_fields, NF(comm_properties_fields), 0,
                               init_comm_properties, NULL},
    [N4P_S_WAIT_SIGNAL_DESC] = {"WaitSignalDesc", sizeof(ncclWaitSignalDesc_t),
                                wait_signal_desc_fields, NF(wait_signal_desc_fields), 1, NULL,
                                NULL},
    [N4P_S_DEV_COMM_REQUIREMENTS] = {"DevCommRequirements", sizeof(ncclDevCommRequirements_t),
                                     dev_comm_requirements_fields,
                                     NF(dev_comm_requirements_fields), 0,
                                     init_dev_comm_requirements, NULL},
    [N4P_S_DEV_COMM] = {"DevComm", sizeof(ncclDevComm_t), NULL, 0, 0, NULL, NULL},
};

/* --------------------------------------------------------------- helpers */

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
    if (o != NULL && specs[kind].init)
        specs[kind].init(o->ptr);
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

/* ---------------------------------------------------------------- fields */

static PyObject *
field_get(sobj *self, void *closure)
{
    const field_t *f = closure;
    const char *p = (const char *)self->ptr + f->offset;
    switch (f->kind) {
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
    case F_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return PyFloat_FromDouble(v);
    }
    case F_CSTR: {
        const char *s;
        memcpy(&s, p, sizeof s);
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
    char *p = (char *)self->ptr + f->offset;
    switch (f->kind) {
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
    case F_U8: {
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
        if (self->refs == NULL && (self->refs = PyDict_New()) == NULL) {
            Py_DECREF(pinned);
            return -1;
        }
        /* the bytes object stays alive as long as the struct points at it */
        int rc = PyDict_SetItemString(self->refs, f->name, pinned);
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
    if (o != NULL && specs[kind].init)
        specs[kind].init(o->ptr);
    return (PyObject *)o;
}

void *
n4p_struct_ptr(n4p_state *st, int kind, PyObject *o)
{
    if (Py_TYPE(o) != st->struct_types[kind])
        return NULL;
    return ((sobj *)o)->ptr;
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

/* {name: (sizeof, [(field, offset, kind-letter)])} for the NumPy dtypes. */
PyObject *
n4p_struct_layouts(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    static const char *codes[] = {[F_SIZE] = "u8", [F_U32] = "u4", [F_I32] = "i4",
                                  [F_U8] = "u1", [F_F32] = "f4", [F_CSTR] = "p",
                                  [F_PTR] = "p"};
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int k = 0; k < N4P_S_COUNT; k++) {
        const spec_t *sp = &specs[k];
        PyObject *fields = PyList_New(sp->nfields);
        if (fields == NULL)
            goto fail;
        for (int i = 0; i < sp->nfields; i++) {
            PyObject *t = Py_BuildValue("(sns)", sp->fields[i].name, (Py_ssize_t)sp->fields[i].offset,
                                        codes[sp->fields[i].kind]);
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
