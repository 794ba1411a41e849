/*
 * handles.c - Comm and Window: the handle objects of the nccl4py 0.5+ low
 * level.
 *
 * Each object owns one pointer-sized slot.  A creating function passes the
 * slot's address to the library as its out-parameter and returns the object,
 * so a value the library writes later (a non-blocking init, a window
 * registered inside a group) shows up in `.handle`.
 *
 * Such a slot may be written after the object is gone: a non-blocking init
 * returns ncclInProgress and fills it from the library's own thread when it
 * is done, whether or not anyone still holds the Comm.  The slot is the one
 * slot type (slot.c): the objects of creating functions, and any object
 * whose `handle_ptr` was read, keep the value in a cell of its own, which
 * outlives the object while the library may still write it.  Objects made
 * from a value whose address never left them (Comm(5), comm_init_all) hold
 * it in the object.
 *
 * A Window also remembers the communicator its creating function was given
 * (`owner`): a function that takes a communicator and a Window object of
 * another one refuses it (NcclInvalid) before the library looks the window
 * up in the wrong communicator.  Ints, and objects made by hand, carry no
 * communicator and are passed on as they are.
 *
 * Code written for the 0.2 low level keeps handles as ints: it adds to them,
 * compares them with ints and uses them as dict keys.  The objects therefore
 * behave as the integer they hold: the number protocol returns plain ints,
 * comparison and hashing are by value.  They are not int subclasses, because
 * an int cannot follow the slot when the library fills it.
 */
#include "bindings.h"

typedef n4p_handleobj handleobj; /* bindings.h: the converters read the slot inline */

static int
h_init(handleobj *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"handle", NULL};
    PyObject *v = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O", kw, &v))
        return -1;
    void *p = NULL;
    if (v != NULL && n4p_arg_ptr(v, "handle", &p) < 0)
        return -1;
    if (N4P_FT_LOAD(&self->slot.at) != &self->slot.own) { /* __init__ again, with a cell */
        n4p_slot_set(&self->slot, p);
        return 0;
    }
    n4p_slot_set(&self->slot, p);
    self->owner = NULL;
    return 0;
}

static PyObject *
h_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    PyObject *o = PyType_GenericNew(tp, args, kwds);
    if (o != NULL)
        n4p_slot_init(&((handleobj *)o)->slot, NULL);
    return o;
}

static void
h_dealloc(handleobj *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    n4p_slot_release(&self->slot);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* The handle as a Python int: signed, as upstream's intptr_t. */
static PyObject *
h_int(handleobj *self)
{
    return PyLong_FromSsize_t((Py_ssize_t)(intptr_t)n4p_slot_get(&self->slot));
}

static PyObject *
h_get_handle(handleobj *self, void *Py_UNUSED(c))
{
    return h_int(self);
}

static PyObject *
h_get_slot(handleobj *self, void *Py_UNUSED(c))
{
    return n4p_slot_address(&self->slot);
}

static int
h_bool(handleobj *self)
{
    return n4p_slot_get(&self->slot) != NULL;
}

static PyObject *
h_repr(handleobj *self)
{
    return PyUnicode_FromFormat("<%s handle=%p object at %p>", Py_TYPE(self)->tp_name,
                                n4p_slot_get(&self->slot), (void *)self);
}

static Py_hash_t
h_hash(handleobj *self)
{
    PyObject *v = h_int(self);
    if (v == NULL)
        return -1;
    Py_hash_t h = PyObject_Hash(v);
    Py_DECREF(v);
    return h;
}

/* One tp_hash per kind (the same function behind each): the slot a type
 * and its subclasses share identifies the kind without the module state. */
Py_hash_t
n4p_comm_hash(PyObject *self)
{
    return h_hash((handleobj *)self);
}

Py_hash_t
n4p_window_hash(PyObject *self)
{
    return h_hash((handleobj *)self);
}

static const hashfunc kind_hash[N4P_H_COUNT] = {[N4P_H_COMM] = n4p_comm_hash,
                                                [N4P_H_WINDOW] = n4p_window_hash};
static const char *const kind_name[N4P_H_COUNT] = {[N4P_H_COMM] = "Comm",
                                                   [N4P_H_WINDOW] = "Window"};

int
n4p_is_handle(PyObject *o)
{
    hashfunc h = Py_TYPE(o)->tp_hash;
    return h == n4p_comm_hash || h == n4p_window_hash;
}

int
n4p_handle_check(PyObject *o, enum n4p_handle_kind kind, const char *name)
{
    hashfunc h = Py_TYPE(o)->tp_hash;
    if (h == kind_hash[kind])
        return 1;
    for (int k = 0; k < N4P_H_COUNT; k++) {
        if (h == kind_hash[k]) {
            PyErr_Format(PyExc_TypeError, "%s must be a %s (or an int handle), not a %s", name,
                         kind_name[kind], kind_name[k]);
            return -1;
        }
    }
    return 0;
}

PyObject *
n4p_handle_result(PyObject *h)
{
    /* Inside a group the library fills the slot at the group's end: the
     * object stays alive until then even if the caller drops it. */
    if (n4p_group_depth() > 0)
        n4p_group_keep(h, NULL);
    return Py_NewRef(h);
}

/* o as an int for arithmetic and comparison: a new reference, NULL with no
 * exception when o is not integer-like. */
static PyObject *
as_int(PyObject *o)
{
    if (n4p_is_handle(o))
        return h_int((handleobj *)o);
    if (PyLong_Check(o))
        return Py_NewRef(o);
    if (PyIndex_Check(o) && !PyFloat_Check(o))
        return PyNumber_Index(o);
    return NULL;
}

/* fn(a, b) on the integers of a and b, or NotImplemented when one is not
 * integer-like; op >= 0 compares with op instead (fn is NULL). */
static PyObject *
on_ints(PyObject *a, PyObject *b, binaryfunc fn, int op)
{
    PyObject *x = as_int(a);
    if (x == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *y = as_int(b);
    if (y == NULL) {
        Py_DECREF(x);
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    }
    PyObject *r = fn != NULL ? fn(x, y) : PyObject_RichCompare(x, y, op);
    Py_DECREF(x);
    Py_DECREF(y);
    return r;
}

#define BINOP(name, fn)                                                                        \
    static PyObject *name(PyObject *a, PyObject *b) { return on_ints(a, b, fn, -1); }
BINOP(h_add, PyNumber_Add)
BINOP(h_sub, PyNumber_Subtract)
BINOP(h_and, PyNumber_And)
BINOP(h_or, PyNumber_Or)
BINOP(h_xor, PyNumber_Xor)
BINOP(h_lshift, PyNumber_Lshift)
BINOP(h_rshift, PyNumber_Rshift)
BINOP(h_floordiv, PyNumber_FloorDivide)
BINOP(h_rem, PyNumber_Remainder)
#undef BINOP

static PyObject *
h_richcompare(PyObject *a, PyObject *b, int op)
{
    return on_ints(a, b, NULL, op);
}

static PyObject *
h_format(handleobj *self, PyObject *spec)
{
    PyObject *v = h_int(self);
    if (v == NULL)
        return NULL;
    PyObject *r = PyObject_Format(v, spec);
    Py_DECREF(v);
    return r;
}

static PyObject *
h_reduce(handleobj *self, PyObject *Py_UNUSED(unused))
{
    return Py_BuildValue("O(N)", (PyObject *)Py_TYPE(self), h_int(self));
}

static PyGetSetDef h_getset[] = {
    {"handle", (getter)h_get_handle, NULL, "the handle value the slot holds now, as an int",
     NULL},
    {"handle_ptr", (getter)h_get_slot, NULL,
     "the address of the slot (what a creating function hands the library)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef h_methods[] = {
    {"__format__", (PyCFunction)h_format, METH_O, NULL},
    {"__reduce__", (PyCFunction)h_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

#define HANDLE_SLOTS(doc, hash)                                                                \
    {                                                                                          \
        {Py_tp_doc, (void *)(doc)}, {Py_tp_new, h_new}, {Py_tp_init, h_init},      \
            {Py_tp_dealloc, h_dealloc}, {Py_tp_getset, h_getset},                              \
            {Py_tp_methods, h_methods}, {Py_tp_repr, h_repr}, {Py_tp_hash, (void *)(hash)},    \
            {Py_tp_richcompare, h_richcompare}, {Py_nb_int, h_int}, {Py_nb_index, h_int},      \
            {Py_nb_bool, h_bool}, {Py_nb_add, h_add}, {Py_nb_subtract, h_sub},                 \
            {Py_nb_and, h_and}, {Py_nb_or, h_or}, {Py_nb_xor, h_xor},                          \
            {Py_nb_lshift, h_lshift}, {Py_nb_rshift, h_rshift},                                \
            {Py_nb_floor_divide, h_floordiv}, {Py_nb_remainder, h_rem}, {0, NULL},             \
    }

static PyType_Slot comm_slots[] = HANDLE_SLOTS(
    "Comm(handle=0)\n--\n\n"
    "A communicator handle (ncclComm_t).  Creating functions return one whose\n"
    "slot the library filled; it can be used wherever an int handle can.",
    n4p_comm_hash);
static PyType_Slot window_slots[] = HANDLE_SLOTS(
    "Window(handle=0)\n--\n\n"
    "A window handle (ncclWindow_t).  Creating functions return one whose\n"
    "slot the library filled; it can be used wherever an int handle can.",
    n4p_window_hash);

static PyType_Spec handle_specs[N4P_H_COUNT] = {
    [N4P_H_COMM] = {.name = "nccl.bindings.nccl.Comm",
                    .basicsize = sizeof(handleobj),
                    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                    .slots = comm_slots},
    [N4P_H_WINDOW] = {.name = "nccl.bindings.nccl.Window",
                      .basicsize = sizeof(handleobj),
                      .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                      .slots = window_slots},
};

void **
n4p_handle_slot(PyObject *o)
{
    return N4P_FT_LOAD(&((handleobj *)o)->slot.at);
}

PyObject *
n4p_handle_new(n4p_state *st, enum n4p_handle_kind kind, void *value)
{
    PyTypeObject *tp = st->handle_types[kind];
    PyObject *o = tp->tp_alloc(tp, 0);
    if (o != NULL) {
        handleobj *h = (handleobj *)o;
        n4p_slot_init(&h->slot, value);
        h->owner = NULL;
    }
    return o;
}

PyObject *
n4p_handle_new_out(n4p_state *st, enum n4p_handle_kind kind)
{
    PyObject *o = n4p_handle_new(st, kind, NULL);
    if (o != NULL && n4p_slot_out(&((handleobj *)o)->slot) == NULL)
        Py_CLEAR(o);
    return o;
}

void
n4p_handle_called(PyObject *h, ncclResult_t r)
{
    n4p_slot_lent(&((handleobj *)h)->slot, r);
}

void
n4p_handle_set_owner(PyObject *h, void *comm)
{
    ((handleobj *)h)->owner = comm;
}

int
n4p_window_check_owner(PyObject *mod, PyObject *win, void *comm, const char *name)
{
    if (Py_TYPE(win)->tp_hash != n4p_window_hash)
        return 0;
    void *owner = ((handleobj *)win)->owner;
    if (owner == NULL || owner == comm)
        return 0;
    PyErr_Format(n4p_get_state(mod)->nccl_invalid,
                 "%s was registered on communicator %p, not on communicator %p it is used "
                 "with: a Window belongs to the communicator that registered it",
                 name, owner, comm);
    return -1;
}

int
n4p_handle_kind_of(n4p_state *st, PyObject *o)
{
    for (int k = 0; k < N4P_H_COUNT; k++)
        if (PyObject_TypeCheck(o, st->handle_types[k]))
            return k;
    return -1;
}

int
n4p_init_handles(PyObject *mod, n4p_state *st)
{
    for (int k = 0; k < N4P_H_COUNT; k++) {
        PyObject *tp = PyType_FromModuleAndSpec(mod, &handle_specs[k], NULL);
        if (tp == NULL)
            return -1;
        st->handle_types[k] = (PyTypeObject *)tp;
        const char *dot = strrchr(handle_specs[k].name, '.');
        if (PyModule_AddObjectRef(mod, dot + 1, tp) < 0)
            return -1;
    }
    return 0;
}
