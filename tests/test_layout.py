"""The memory layout rule: a buffer is accepted only when its memory order is
its logical row-major order, for every way an array reaches nccl4py (buffer
protocol, __array_interface__, __cuda_array_interface__, DLPack capsules and
the DLPack C exchange API, explicit specs).

NCCL reads a buffer as one flat block.  A Fortran-ordered array (``a.T`` of a
C-ordered one, torch ``.t()``) is contiguous but its flat memory order is not
its element order, so a reduction of it gives every rank a transposed result.
It must be refused, with a message naming the argument and its strides.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import nccl.core as nc
from nccl._errors import NcclInvalid
from nccl._nccl import resolve_buffer
from dlpack_producers import CAI, Deleters, LegacyProducer, Producer, exchange_class


def refused(name: str, shape: tuple, strides: tuple, unit: str) -> str:
    return "^" + re.escape(f"{name} is not contiguous in row-major (C) order "
                           f"(shape {shape}, strides {strides} {unit})")


def rb(obj, name="buf", writable=False):
    return resolve_buffer(obj, name, writable)


C34 = np.arange(12, dtype=np.float64).reshape(3, 4)


class ArrayInterface:
    """Only __array_interface__ (no buffer protocol, no DLPack)."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class NumpyDLPack:
    """NumPy's own __dlpack__ (and nothing else)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)


# ------------------------------------------------------------------- NumPy

@pytest.mark.parametrize("make,shape,strides", [
    (lambda: C34.T, (4, 3), (8, 32)),
    (lambda: np.asfortranarray(C34), (3, 4), (8, 24)),
    (lambda: np.zeros((2, 3, 4)).transpose(2, 1, 0), (4, 3, 2), (8, 32, 96)),
    (lambda: np.arange(6.0)[::-1], (6,), (-8,)),
    (lambda: np.broadcast_to(np.arange(3.0), (4, 3)), (4, 3), (0, 8)),
    (lambda: C34[:, ::2], (3, 2), (32, 16)),
    (lambda: C34[:, 1], (3,), (32,)),
], ids=["transpose", "fortran", "transpose_3d", "negative", "zero_stride", "step", "column"])
def test_numpy_layouts_refused_with_strides(make, shape, strides):
    a = make()
    with pytest.raises(NcclInvalid, match=refused("sendbuf", shape, strides, "bytes")):
        rb(a, "sendbuf")
    with pytest.raises(NcclInvalid, match=refused("buf", shape, strides, "bytes")):
        rb(memoryview(a))  # the plain buffer protocol


@pytest.mark.parametrize("make,count", [
    (lambda: np.array(2.0), 1),                      # 0-d
    (lambda: np.zeros((1, 5)).T, 5),                 # shape (5, 1): only size-1 dims differ
    (lambda: np.zeros((4, 1))[:, ::3], 4),           # a stride on a size-1 dimension
    (lambda: np.zeros((1, 1, 1)), 1),
    (lambda: np.asfortranarray(np.zeros((1, 6))), 6),
    (lambda: np.asfortranarray(np.zeros((3, 0))), 0),  # empty: no memory order to get wrong
    (lambda: C34[1:3], 8),                           # a row block of a C array
])
def test_row_major_layouts_accepted(make, count):
    assert rb(make())[1] == count


def test_communicator_refuses_a_transpose(recording_stub):
    comm = nc.Communicator(0x7F00_1234_5000)
    out = np.zeros((4, 3))
    with pytest.raises(NcclInvalid, match=refused("sendbuf", (4, 3), (8, 32), "bytes")):
        comm.allreduce(C34.T, out, nc.SUM)
    with pytest.raises(NcclInvalid, match=refused("recvbuf", (4, 3), (8, 32), "bytes")):
        comm.allreduce(np.zeros((4, 3)), np.zeros((3, 4)).T, nc.SUM)
    with pytest.raises(NcclInvalid, match=refused("sendbuf", (3, 4), (8, 24), "bytes")):
        comm.allreduce((np.asfortranarray(C34), 12, nc.FLOAT64), out, nc.SUM)  # explicit spec


# ------------------------------------------------------- other producers

def test_array_interface_and_cai_refuse_fortran_order():
    with pytest.raises(NcclInvalid, match=refused("x", (4, 3), (8, 32), "bytes")):
        rb(ArrayInterface(C34.T), "x")
    assert rb(ArrayInterface(C34))[1] == 12
    with pytest.raises(NcclInvalid, match=refused("x", (2, 3), (4, 8), "bytes")):
        rb(CAI(strides=(4, 8)), "x")
    assert rb(CAI(shape=(3, 1), strides=(4, 4)))[1] == 3  # size-1 dim


@pytest.mark.parametrize("cls", [Producer, LegacyProducer])
def test_dlpack_capsules_refuse_column_major(lib, cls):  # noqa: F811
    d = Deleters(lib)
    with pytest.raises(NcclInvalid, match=refused("x", (2, 3), (1, 2), "elements")):
        rb(cls(lib, shape=(2, 3), strides=(1, 2), versioned=cls is Producer), "x")
    assert rb(cls(lib, shape=(2, 3), strides=(3, 1), versioned=cls is Producer))[1] == 6
    assert rb(cls(lib, shape=(2, 3), strides=None, versioned=cls is Producer))[1] == 6  # NULL
    assert d.calls == 3  # every capsule released, also the refused one


def test_numpy_dlpack_refuses_transpose():
    with pytest.raises(NcclInvalid, match=refused("x", (4, 3), (1, 4), "elements")):
        rb(NumpyDLPack(C34.T), "x")


@pytest.mark.parametrize("which", [0, 1])
def test_exchange_api_refuses_column_major(lib, which):  # noqa: F811
    cls = exchange_class(lib, which)
    with pytest.raises(NcclInvalid, match=refused("x", (3, 2), (1, 3), "elements")):
        rb(cls(shape=(3, 2), strides=(1, 3)), "x")
    assert rb(cls(shape=(3, 2), strides=(2, 1)))[1] == 6


def test_torch_transposes_refused():
    torch = pytest.importorskip("torch", reason="torch is not installed (CPU torch is optional)")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with pytest.raises(NcclInvalid, match=refused("x", (4, 3), (1, 4), "elements")):
        rb(t.t(), "x")
    with pytest.raises(NcclInvalid, match=refused("x", (3, 2), (4, 2), "elements")):
        rb(t[:, ::2], "x")
    assert rb(t.t().contiguous())[1] == 12
    assert rb(t[1:])[1] == 8
    assert rb(torch.zeros(5, 1).t())[1] == 5
