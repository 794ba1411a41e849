/*
 * pointerbox.c - PointerBox: a pointer-sized slot whose address can be
 * handed to the library as an out-parameter (the nccl4py 0.3 convention,
 * which lets a non-blocking init fill the handle later).  The slot is the
 * one slot type (slot.c): once `.address` was read, the value lives in a
 * cell that outlives the box while the library may still write it.
 */
#include "bindings.h"

typedef struct {
    PyObject_HEAD
    n4p_slot slot;
} pbox;

/* The value as the signed int it reads as (intptr_t). */
#define PTR(self) ((intptr_t)n4p_slot_get(&(self)->slot))

static PyObject *
pb_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    PyObject *o = PyType_GenericNew(tp, args, kwds);
    if (o != NULL)
        n4p_slot_init(&((pbox *)o)->slot, NULL);
    return o;
}

static int
pb_init(pbox *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"ptr", NULL};
    PyObject *v = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:PointerBox", kw, &v))
        return -1;
    void *p = NULL;
    if (v != NULL && n4p_arg_ptr(v, "ptr", &p) < 0)
        return -1;
    n4p_slot_set(&self->slot, p);
    return 0;
}

static void
pb_dealloc(pbox *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    n4p_slot_release(&self->slot);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
pb_address(pbox *self, void *Py_UNUSED(c))
{
    return n4p_slot_address(&self->slot);
}

static PyObject *
pb_int(pbox *self)
{
    return PyLong_FromSsize_t(PTR(self));
}

static int
pb_bool(pbox *self)
{
    return PTR(self) != 0;
}

static PyObject *
pb_repr(pbox *self)
{
    return PyUnicode_FromFormat("<PointerBox ptr=%p>", n4p_slot_get(&self->slot));
}

static PyObject *
pb_format(pbox *self, PyObject *spec)
{
    PyObject *v = PyLong_FromSsize_t(PTR(self));
    if (v == NULL)
        return NULL;
    PyObject *r = PyObject_Format(v, spec);
    Py_DECREF(v);
    return r;
}

static PyObject *
pb_get_ptr(pbox *self, void *Py_UNUSED(c))
{
    return pb_int(self);
}

/* box.ptr = v: what PointerBox(ptr=v) accepts; a refused value leaves the
 * box as it was. */
static int
pb_set_ptr(pbox *self, PyObject *v, void *Py_UNUSED(c))
{
    if (v == NULL) {
        PyErr_SetString(PyExc_TypeError, "cannot delete PointerBox.ptr");
        return -1;
    }
    void *p;
    if (n4p_arg_ptr(v, "ptr", &p) < 0)
        return -1;
    n4p_slot_set(&self->slot, p);
    return 0;
}

static PyGetSetDef pb_getset[] = {
    {"ptr", (getter)pb_get_ptr, (setter)pb_set_ptr, "the stored pointer value", NULL},
    {"address", (getter)pb_address, NULL, "address of the slot, to pass as an out-parameter", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef pb_methods[] = {
    {"__format__", (PyCFunction)pb_format, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot pb_slots[] = {
    {Py_tp_doc, "PointerBox(ptr=0)\n--\n\nStable storage for a pointer that the library fills "
                "(keep the box in a variable, pass box.address as the out-parameter; read "
                "box.ptr or int(box)).  PointerBox().address is a temporary's address, freed "
                "before the call."},
    {Py_tp_new, pb_new},
    {Py_tp_init, pb_init},
    {Py_tp_dealloc, pb_dealloc},
    {Py_tp_getset, pb_getset},
    {Py_tp_methods, pb_methods},
    {Py_tp_repr, pb_repr},
    {Py_nb_int, pb_int},
    {Py_nb_index, pb_int},
    {Py_nb_bool, pb_bool},
    {0, NULL},
};

static PyType_Spec pb_spec = {
    .name = "nccl.bindings.PointerBox",
    .basicsize = sizeof(pbox),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = pb_slots,
};

int
n4p_init_pointer_box(PyObject *mod, n4p_state *st)
{
    PyObject *tp = PyType_FromModuleAndSpec(mod, &pb_spec, NULL);
    if (tp == NULL)
        return -1;
    st->pointer_box_type = (PyTypeObject *)tp;
    return PyModule_AddObjectRef(mod, "PointerBox", tp);
}
