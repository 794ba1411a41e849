/*
 * slot.h - a pointer-sized slot whose address the library may get as an
 * out-parameter (ncclComm_t *, ncclWindow_t *, ...): the storage of
 * PointerBox, Comm / Window and nccl.core's Communicator (slot.c).
 */
#ifndef NCCL4PY_SLOT_H
#define NCCL4PY_SLOT_H

/* Inside an object.  `at` is where the value is: `own` while the slot's
 * address has not left the object, a cell of its own (slot.c) from the
 * moment it does.  Readers go through `at`, always. */
typedef struct {
    void **at;
    void *own;
} n4p_slot;

static inline void
n4p_slot_init(n4p_slot *s, void *value)
{
    s->own = value;
    s->at = &s->own;
}

/* The value, and setting it (both atomic on a free-threaded build, where
 * the value may move to a cell while another thread reads or sets it: the
 * move and every set take slot.c's mutex there; with a GIL these are the
 * plain load and store). */
static inline void *
n4p_slot_get(n4p_slot *s)
{
    void **at = N4P_FT_LOAD(&s->at);
    return N4P_FT_LOAD(at);
}
#if N4P_FREE_THREADED
void n4p_slot_set(n4p_slot *s, void *value);
#else
static inline void
n4p_slot_set(n4p_slot *s, void *value)
{
    *s->at = value;
}
#endif

/* The slot's address for the library, from a creating function that passes
 * it as the out-parameter: the value moves to a cell first (NULL with
 * MemoryError when there is no memory for one). */
void **n4p_slot_out(n4p_slot *s);
/* ... and the library returned r: a call in progress (ncclInProgress) or
 * any call inside a group may still write the cell. */
void n4p_slot_lent(n4p_slot *s, ncclResult_t r);
/* The slot's address as a Python int, for the user (PointerBox.address,
 * Comm.handle_ptr, Communicator._comm_address): the value moves to a cell,
 * which is noted among the escaped ones so that a creating function given
 * that address can tell (n4p_slot_returned). */
PyObject *n4p_slot_address(n4p_slot *s);
/* The owner is gone: the cell is freed, or kept for the rest of the process
 * when the library may still write it. */
void n4p_slot_release(n4p_slot *s);

/* A creating function gave the library `addr`, an address it got as an
 * int, and the library returned r: if the library may still write there
 * and `addr` is an escaped cell's, that cell is lent (the escaped cells are
 * only looked at then). */
void n4p_slot_returned(void *addr, ncclResult_t r);

/* _slot_stats(): (escaped cells now, cells kept for the library) */
PyObject *n4p_slot_stats(PyObject *mod, PyObject *unused);

#endif /* NCCL4PY_SLOT_H */
