/*
 * call_checks.c - the checks of a call's buffers, by the rules of
 * collectives.def: each buffer lives where the communicator works, send and
 * receive buffers have one dtype, enough (or exactly the) elements for the
 * count, and overlap only in the call's in-place form (docs/semantics.md).
 * What the library then gets (buffers, count, dtype) is filled in here.
 */
#include "communicator.h"

#include <string.h>

static int
is_host_memory(int t)
{
    return t == N4P_DEV_CPU || t == N4P_DEV_CUDA_HOST || t == N4P_DEV_ROCM_HOST;
}

/* The buffer must live where the communicator works. */
static inline int
check_device(PyObject *mod, commobj *self, const n4p_buffer *b, const char *name)
{
    if (self->dev_type == N4P_DEV_CPU) {
        if (!is_host_memory(b->device_type) && b->device_type != N4P_DEV_CUDA_MANAGED) {
            n4p_comm_invalid(mod, "%s is in GPU memory (DLPack device type %d, device %d), but "
                             "this communicator runs on the host backend, which works on host "
                             "(CPU) memory", name, b->device_type, b->device_id);
            return -1;
        }
        return 0;
    }
    if (b->device_type == N4P_DEV_CPU) {
        n4p_comm_invalid(mod, "%s is a host (CPU) buffer, but communicator is on GPU device %d. "
                         "Buffers must be in device memory on the communicator's device.",
                         name, self->dev_id);
        return -1;
    }
    if (b->device_id >= 0 && !is_host_memory(b->device_type) && b->device_id != self->dev_id) {
        n4p_comm_invalid(mod, "%s is on device %d, but communicator is on device %d. Buffers "
                         "must be on the same device as the communicator.", name, b->device_id,
                         self->dev_id);
        return -1;
    }
    return 0;
}

static inline int
resolve(PyObject *mod, commobj *self, n4p_job *j, int which, int role)
{
    static const int role_of[NBUF] = {[B_SEND] = A_SEND, [B_RECV] = A_RECV, [B_BIAS] = A_BIAS};
    n4p_buffer *b = &j->buf[which];
    const char *name = n4p_coll_keywords[role];
    PyObject *obj = j->args[j->at[role]];
    int flags = which == B_RECV ? N4P_BUF_WRITABLE : 0;
    for (int k = 0; k < NBUF; k++) /* in place: the same object as another buffer */
        if (j->resolved & 1u << k && j->args[j->at[role_of[k]]] == obj)
            flags |= N4P_BUF_AGAIN;
    if (n4p_buffer_resolve(mod, obj, name, flags, b) < 0)
        return -1;
    j->resolved |= 1u << which;
    if (check_device(mod, self, b, name) < 0)
        return -1;
    n4p_trace_note_buffer(j->te, which == B_RECV, b->ptr, b->count, b->dtype);
    return 0;
}

static int
same_dtype(PyObject *mod, const n4p_buffer *s, const n4p_buffer *o, const char *oname)
{
    if (s->dtype == o->dtype)
        return 0;
    n4p_comm_invalid(mod, "Dtype mismatch: sendbuf has dtype %s, %s has dtype %s",
                     n4p_dtype_name(s->dtype), oname, n4p_dtype_name(o->dtype));
    return -1;
}

/* The send and receive extents a call uses may only overlap in its in-place
 * form, described by `form`: sendbuf starting *inplace bytes after recvbuf
 * (a negative offset: before; NULL: no in-place form here).  Any other
 * overlap would read memory the call has already written. */
static int
check_overlap(PyObject *mod, const char *sname, const void *sp, size_t sbytes, const void *rp,
              size_t rbytes, const intptr_t *inplace, const char *form)
{
    uintptr_t s = (uintptr_t)sp, r = (uintptr_t)rp;
    if (sbytes == 0 || rbytes == 0 || s >= r + rbytes || r >= s + sbytes)
        return 0;
    if (inplace != NULL && s == r + (uintptr_t)*inplace)
        return 0;
    n4p_comm_invalid(mod, "%s and recvbuf overlap (%s uses bytes [%p, %p), recvbuf [%p, %p)) "
                     "without being the in-place form of this call (%s): the result would be "
                     "wrong; use separate buffers or the exact in-place form", sname, sname, sp,
                     (void *)(s + sbytes), rp, (void *)(r + rbytes), form);
    return -1;
}

static const intptr_t same_address = 0;

/* count elements of both, in place when they coincide */
static int
same_or_disjoint(PyObject *mod, const n4p_buffer *s, const n4p_buffer *r, size_t count)
{
    size_t bytes = count * n4p_dtype_size(s->dtype);
    return check_overlap(mod, "sendbuf", s->ptr, bytes, r->ptr, bytes, &same_address,
                         "sendbuf is recvbuf");
}

/* sendbuf's part for each rank (sendbuf must have one element per rank) */
static int
per_rank(PyObject *mod, const commobj *self, const n4p_buffer *s, size_t *per)
{
    *per = s->count / (size_t)self->nranks;
    if (*per >= 1)
        return 0;
    n4p_comm_invalid(mod, "sendbuf must have at least %d elements (nranks), got %zu",
                     self->nranks, s->count);
    return -1;
}

/* recvbuf and sendbuf + rank * per in place, sendbuf holding nranks parts */
static int
part_or_disjoint(PyObject *mod, const commobj *self, const n4p_buffer *s, const n4p_buffer *r,
                 size_t per)
{
    size_t es = n4p_dtype_size(s->dtype);
    intptr_t at = -(intptr_t)((size_t)self->rank * per * es);
    return check_overlap(mod, "sendbuf", s->ptr, per * (size_t)self->nranks * es, r->ptr,
                         per * es, &at, "recvbuf is sendbuf + rank * recvcount");
}

/* counts/displacements: one per rank, non-negative; extents within the buffer */
static int
get_layout(PyObject *mod, commobj *self, n4p_job *j, int first, const n4p_buffer *b,
           const char *bufname)
{
    PyObject *counts = j->args[j->at[A_SCOUNTS + first]];
    PyObject *displs = j->args[j->at[A_SDISPLS + first]];
    const char *cname = n4p_coll_keywords[A_SCOUNTS + first], *dname = n4p_coll_keywords[A_SDISPLS + first];
    size_t **c = &j->counts[first], **d = &j->counts[first + 1];
    Py_ssize_t nc, nd;
    int oc, od;
    if (counts == Py_None || displs == Py_None || PyLong_Check(counts) || PyLong_Check(displs)) {
        n4p_comm_invalid(mod, "%s and %s must be sequences of one int per rank", cname, dname);
        return -1;
    }
    if (n4p_arg_size_array(counts, cname, c, &nc, &oc) < 0 ||
        n4p_arg_size_array(displs, dname, d, &nd, &od) < 0)
        return -1;
    if (nc != self->nranks || nd != self->nranks) {
        n4p_comm_invalid(mod, "%s and %s must have one entry per rank (%d), got %zd and %zd",
                         cname, dname, self->nranks, nc, nd);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        if ((*c)[i] > b->count || (*d)[i] > b->count - (*c)[i]) {
            n4p_comm_invalid(mod, "%s[%zd] + %s[%zd] = %zu exceeds %s's %zu elements", dname, i,
                             cname, i, (*d)[i] + (*c)[i], bufname, b->count);
            return -1;
        }
    }
    return 0;
}

int
n4p_check_buffers(PyObject *mod, commobj *self, n4p_job *j)
{
    n4p_buffer *s = &j->buf[B_SEND], *r = &j->buf[B_RECV], *bias = &j->buf[B_BIAS];
    n4p_call *c = &j->call;
    int rule = j->rule, at_root = c->root == self->rank;
    size_t nranks = (size_t)self->nranks, per;
    switch (rule) {
    case R_REDUCE:
    case R_GATHER: {
        if (resolve(mod, self, j, B_SEND, A_SEND) < 0)
            return -1;
        c->count = s->count;
        c->dtype = s->dtype;
        if (c->root >= 0 && !at_root)
            break; /* recvbuf is not used on this rank */
        if (resolve(mod, self, j, B_RECV, A_RECV) < 0 || same_dtype(mod, s, r, "recvbuf") < 0)
            return -1;
        size_t factor = rule == R_GATHER ? nranks : 1, need = factor * s->count;
        if (r->count < need) {
            n4p_comm_invalid(mod, "Buffer count mismatch: recvbuf must have at least %zu "
                             "elements%s, got %zu", need, factor == 1 ? "" :
                             " (nranks * sendcount)", r->count);
            return -1;
        }
        size_t es = n4p_dtype_size(s->dtype);
        intptr_t at = (intptr_t)((size_t)self->rank * s->count * es);
        if (factor == 1 ? same_or_disjoint(mod, s, r, s->count) < 0
                        : check_overlap(mod, "sendbuf", s->ptr, s->count * es, r->ptr, need * es,
                                        &at, "sendbuf is recvbuf + rank * sendcount") < 0)
            return -1;
        break;
    }
    case R_REDUCE_SCATTER:
    case R_ALLTOALL:
        if (resolve(mod, self, j, B_SEND, A_SEND) < 0 ||
            resolve(mod, self, j, B_RECV, A_RECV) < 0 || same_dtype(mod, s, r, "recvbuf") < 0 ||
            per_rank(mod, self, s, &per) < 0)
            return -1;
        if (rule == R_REDUCE_SCATTER && r->count < per) {
            n4p_comm_invalid(mod, "recvbuf must have at least %zu elements (sendcount / nranks), "
                             "got %zu", per, r->count);
            return -1;
        }
        if (rule == R_ALLTOALL && r->count < s->count) {
            n4p_comm_invalid(mod, "Buffer count mismatch: recvbuf must have at least %zu "
                             "elements (nranks * count), got %zu", s->count, r->count);
            return -1;
        }
        if (rule == R_REDUCE_SCATTER ? part_or_disjoint(mod, self, s, r, per) < 0
                                     : same_or_disjoint(mod, s, r, per * nranks) < 0)
            return -1;
        c->count = per;
        c->dtype = s->dtype;
        break;
    case R_BROADCAST:
    case R_SCATTER:
        if (resolve(mod, self, j, B_RECV, A_RECV) < 0)
            return -1;
        c->count = r->count;
        c->dtype = r->dtype;
        if (!at_root)
            break; /* sendbuf is not used on this rank */
        if (resolve(mod, self, j, B_SEND, A_SEND) < 0 || same_dtype(mod, s, r, "recvbuf") < 0)
            return -1;
        if (rule == R_BROADCAST) {
            if (r->count != s->count) {
                n4p_comm_invalid(mod, "Buffer count mismatch: recvbuf must have exactly %zu "
                                 "elements, got %zu", s->count, r->count);
                return -1;
            }
            if (same_or_disjoint(mod, s, r, s->count) < 0)
                return -1;
            break;
        }
        if (per_rank(mod, self, s, &per) < 0)
            return -1;
        if (r->count != per) {
            n4p_comm_invalid(mod, "recvbuf must have exactly %zu elements (sendcount / nranks), "
                             "got %zu", per, r->count);
            return -1;
        }
        if (part_or_disjoint(mod, self, s, r, per) < 0)
            return -1;
        break;
    case R_SEND:
    case R_RECV: {
        int which = rule == R_SEND ? B_SEND : B_RECV;
        if (resolve(mod, self, j, which, rule == R_SEND ? A_SEND : A_RECV) < 0)
            return -1;
        c->count = j->buf[which].count;
        c->dtype = j->buf[which].dtype;
        break;
    }
    case R_BIAS: {
        if (resolve(mod, self, j, B_SEND, A_SEND) < 0 ||
            resolve(mod, self, j, B_RECV, A_RECV) < 0 ||
            resolve(mod, self, j, B_BIAS, A_BIAS) < 0 || same_dtype(mod, s, r, "recvbuf") < 0 ||
            same_dtype(mod, s, bias, "bias") < 0)
            return -1;
        if (r->count < s->count || bias->count < s->count) {
            n4p_comm_invalid(mod, "Buffer count mismatch: recvbuf and bias must have at least "
                             "%zu elements, got %zu and %zu", s->count, r->count, bias->count);
            return -1;
        }
        size_t bytes = s->count * n4p_dtype_size(s->dtype);
        if (same_or_disjoint(mod, s, r, s->count) < 0 ||
            check_overlap(mod, "bias", bias->ptr, bytes, r->ptr, bytes, NULL,
                          "none: bias is read after recvbuf is written") < 0)
            return -1;
        c->count = s->count;
        c->dtype = s->dtype;
        c->bias = bias->ptr;
        break;
    }
    default: { /* R_ALLTOALLV */
        if (resolve(mod, self, j, B_SEND, A_SEND) < 0 ||
            resolve(mod, self, j, B_RECV, A_RECV) < 0 || same_dtype(mod, s, r, "recvbuf") < 0 ||
            get_layout(mod, self, j, 0, s, "sendbuf") < 0 ||
            get_layout(mod, self, j, 2, r, "recvbuf") < 0)
            return -1;
        /* in place: the same memory with the same layout for sending and receiving */
        int same_layout = memcmp(j->counts[0], j->counts[2], nranks * sizeof(size_t)) == 0 &&
                          memcmp(j->counts[1], j->counts[3], nranks * sizeof(size_t)) == 0;
        if (check_overlap(mod, "sendbuf", s->ptr, s->count * n4p_dtype_size(s->dtype), r->ptr,
                          r->count * n4p_dtype_size(r->dtype), same_layout ? &same_address : NULL,
                          "sendbuf is recvbuf, with the same counts and displacements") < 0)
            return -1;
        c->dtype = s->dtype;
        break;
    }
    }
    c->send = j->resolved & 1u << B_SEND ? j->buf[B_SEND].ptr : NULL;
    c->recv = j->resolved & 1u << B_RECV ? j->buf[B_RECV].ptr : NULL;
    return 0;
}

