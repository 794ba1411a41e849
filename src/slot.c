/*
 * slot.c - the one slot type: a pointer-sized value whose address the
 * library may get as an out-parameter (slot.h).
 *
 * A non-blocking init returns ncclInProgress and fills its out-parameter
 * later, from the library's own thread; a creating call inside a group fills
 * it at the group's end.  Either may happen after the Python object that
 * holds the slot is gone, so the slot must not be memory of the object.
 * From the moment its address leaves the object, the value is in a cell of
 * its own (the object's `at` points there); when the object is dropped, the
 * cell is freed, unless the library may still write it: then it is kept on
 * a list for the rest of the process (32 bytes each), and the library
 * writes where it was told to, never into freed or reused memory.
 *
 * When may the library still write a cell?  When the call that received its
 * address returned ncclInProgress, or ran inside a group (the cell is
 * "lent").  A creating function that made the object knows this at once
 * (n4p_slot_out, n4p_slot_lent).  An address the user passes as an int
 * (`box = PointerBox(); f(box.address, ...)`) is looked up, after such a
 * call only, among the cells whose address was handed out (n4p_slot_address
 * notes them, n4p_slot_release forgets them): the generated creating
 * functions call n4p_slot_returned with every out-parameter address they got
 * as an int.  An address handed to the library by other means (ctypes, a
 * library of its own) is not seen: its owner must outlive the call.
 *
 * The escaped cells are a small hash table of lists under a mutex; only the
 * getters of the address, the creating functions and the release of an
 * escaped cell take it, never a collective.
 */
#include "bindings.h"

#include <pthread.h>

enum { ESCAPED = 1, LENT = 2 };

/* `value` first: a slot's address is its cell's. */
typedef struct cell {
    void *value;
    struct cell *prev, *next; /* in its bucket while escaped; `next`: the kept list */
    int state;                /* ESCAPED | LENT, changed under mu */
} cell;

#define NBUCKETS 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cell *escaped[NBUCKETS];
static cell *kept; /* lent cells of objects that are gone */
static Py_ssize_t n_escaped, n_kept;

static cell **
bucket(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    return &escaped[(a >> 4 ^ a >> 10) % NBUCKETS];
}

static void
unlink_escaped(cell *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        *bucket(c) = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    n_escaped--;
}

void **
n4p_slot_out(n4p_slot *s)
{
    void **at = N4P_FT_LOAD(&s->at);
    if (at != &s->own)
        return at;
    cell *c = PyMem_RawCalloc(1, sizeof(cell));
    if (c == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
#if N4P_FREE_THREADED
    /* another thread may move it too, or set the value meanwhile: one move,
     * and no set lost (n4p_slot_set takes mu as well) */
    pthread_mutex_lock(&mu);
    if (s->at == &s->own) {
        c->value = s->own;
        N4P_FT_STORE(&s->at, &c->value);
        c = NULL;
    }
    at = s->at;
    pthread_mutex_unlock(&mu);
    PyMem_RawFree(c);
#else
    c->value = s->own;
    at = s->at = &c->value;
#endif
    return at;
}

#if N4P_FREE_THREADED
void
n4p_slot_set(n4p_slot *s, void *value)
{
    pthread_mutex_lock(&mu);
    N4P_FT_STORE(s->at, value);
    pthread_mutex_unlock(&mu);
}
#endif

void
n4p_slot_lent(n4p_slot *s, ncclResult_t r)
{
    void **at = N4P_FT_LOAD(&s->at);
    if (at != &s->own && (r == ncclInProgress || n4p_group_depth() > 0)) {
        pthread_mutex_lock(&mu);
        ((cell *)at)->state |= LENT;
        pthread_mutex_unlock(&mu);
    }
}

PyObject *
n4p_slot_address(n4p_slot *s)
{
    void **at = n4p_slot_out(s);
    if (at == NULL)
        return NULL;
    cell *c = (cell *)at;
    pthread_mutex_lock(&mu);
    if (!(c->state & ESCAPED)) {
        cell **b = bucket(c);
        c->prev = NULL;
        c->next = *b;
        if (*b != NULL)
            (*b)->prev = c;
        *b = c;
        c->state |= ESCAPED;
        n_escaped++;
    }
    pthread_mutex_unlock(&mu);
    return PyLong_FromVoidPtr(at);
}

void
n4p_slot_returned(void *addr, ncclResult_t r)
{
    if (r != ncclInProgress && n4p_group_depth() == 0)
        return;
    pthread_mutex_lock(&mu);
    for (cell *c = *bucket(addr); c != NULL; c = c->next)
        if ((void *)c == addr) {
            c->state |= LENT;
            break;
        }
    pthread_mutex_unlock(&mu);
}

void
n4p_slot_release(n4p_slot *s)
{
    if (s->at == NULL || s->at == &s->own)
        return;
    cell *c = (cell *)s->at;
    s->at = &s->own;
    s->own = NULL;
    pthread_mutex_lock(&mu);
    if (c->state & ESCAPED)
        unlink_escaped(c);
    int keep = c->state & LENT;
    if (keep) {
        c->next = kept;
        kept = c;
        n_kept++;
    }
    pthread_mutex_unlock(&mu);
    if (!keep)
        PyMem_RawFree(c);
}

PyObject *
n4p_slot_stats(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(unused))
{
    pthread_mutex_lock(&mu);
    Py_ssize_t e = n_escaped, k = n_kept;
    pthread_mutex_unlock(&mu);
    return Py_BuildValue("(nn)", e, k);
}
