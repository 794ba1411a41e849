"""Byte order: an array whose elements are stored in the other byte order
than this machine's is refused on every path (src/buffer.c), whatever else
its metadata says.  The byte-order mark of a typestr or a buffer format is
the most specific fact about the memory: a ``.dtype`` name ("float32",
"bfloat16") or an explicit spec's dtype never overrides it.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

from nccl._enums import DataType as DT
from nccl._errors import NcclInvalid
from nccl._nccl import resolve_buffer
from dlpack_producers import CAI, CPU

LITTLE = sys.byteorder == "little"
FOREIGN, NATIVE = (">", "<") if LITTLE else ("<", ">")
BYTE_ORDER = "has non-native byte order"


def rb(obj, name="buf", writable=False):
    return resolve_buffer(obj, name, writable)


class ArrayInterface:
    """An object exposing only __array_interface__ and a .dtype (as
    array-likes wrapping a NumPy array do)."""

    def __init__(self, a, dtype=None):
        self.a = a
        self.__array_interface__ = a.__array_interface__
        self.dtype = a.dtype if dtype is None else dtype


def refused(obj, name="buf", writable=False, what=None):
    with pytest.raises(NcclInvalid, match=f"^{name} {BYTE_ORDER}") as e:
        rb(obj, name, writable)
    if what is not None:
        assert what in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("typestr", ["f4", "i8", "f8", "u4", "f2", "i4"])
def test_array_interface_typestr_beats_dtype_name(typestr):
    a = np.arange(4, dtype=FOREIGN + typestr)
    msg = refused(ArrayInterface(a), what=f"'{FOREIGN}{typestr}'")
    assert "newbyteorder" in msg
    refused(ArrayInterface(a, dtype=np.dtype(NATIVE + typestr)))  # a lying dtype
    refused(ArrayInterface(a), "recvbuf", True)
    # explicit specs reinterpret bytes but never of another byte order
    refused((ArrayInterface(a), 2))
    refused((ArrayInterface(a), "uint8"))
    refused((ArrayInterface(a), 1, DT.Int8))
    # the same array in native order is fine
    n = a.astype(NATIVE + typestr)
    assert rb(ArrayInterface(n))[1] == 4


def test_ml_dtypes_big_endian_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = np.dtype(ml_dtypes.bfloat16)
    a = np.arange(4, dtype=bf).astype(bf.newbyteorder(FOREIGN))
    assert a.__array_interface__["typestr"] == f"{FOREIGN}V2" and a.dtype.name == "bfloat16"
    refused(a, what=f"'{FOREIGN}V2'")  # the array itself (buffer protocol refuses 'E')
    refused(ArrayInterface(a))
    refused((a, DT.Bfloat16))
    refused((a, 8, DT.Uint8))
    for name in ("float8_e4m3fn", "float8_e5m2"):  # one byte: no byte order
        one = np.zeros(4, getattr(ml_dtypes, name))
        assert rb(ArrayInterface(one.astype(one.dtype.newbyteorder(FOREIGN))))[1] == 4
    native = np.arange(4, dtype=bf)
    assert rb(native)[1:3] == (4, DT.Bfloat16)
    assert rb(ArrayInterface(native))[1:3] == (4, DT.Bfloat16)


def test_array_interface_descr_fields():
    s = np.zeros(3, dtype=[("a", FOREIGN + "f4"), ("b", NATIVE + "i4")])
    assert s.__array_interface__["typestr"] == "|V8"
    refused((ArrayInterface(s), "uint8"))  # the fields say big-endian
    ok = np.zeros(3, dtype=[("a", NATIVE + "f4"), ("b", "u1", (4,))])
    assert rb((ArrayInterface(ok), "uint8"))[1:3] == (24, DT.Uint8)


@pytest.mark.parametrize("typestr", ["f4", "i8", "f8"])
def test_numpy_buffer_protocol(typestr):
    a = np.zeros(4, dtype=FOREIGN + typestr)
    refused(a, what=f"'{FOREIGN}")
    refused((a, "float32"))  # today's reinterpretation of the bytes: refused
    refused((a, 16, "int8"))
    refused((a, 2))
    assert rb(np.zeros(4, "|u1"))[2] == DT.Uint8
    assert rb(np.zeros(4, FOREIGN + "u1"))[2] == DT.Uint8  # one byte: no order


def test_struct_formats(lib):
    bad = ["!i", FOREIGN + "i", FOREIGN + "f", FOREIGN + "d", "!d", "T{!f:x:}", f"T{{<i:a:{FOREIGN}f:b:}}"]
    for fmt in bad:
        size = 8 if "d" in fmt or "T{<i" in fmt else 4
        refused(lib.t_formatted(fmt.encode(), size), what=f"'{fmt}'")
        refused((lib.t_formatted(fmt.encode(), size), "uint8"))
    # native and standard formats in this machine's order are read
    for fmt, want in [(NATIVE + "i", DT.Int32), ("=f", DT.Float32), ("@d", DT.Float64),
                      ("i", DT.Int32), ("!B", DT.Uint8), (FOREIGN + "b", DT.Int8)]:
        size = 8 if "d" in fmt else 1 if fmt[-1] in "Bb" else 4
        assert rb(lib.t_formatted(fmt.encode(), size))[2] == want, fmt
    # names inside a struct format are not byte-order marks
    assert rb((lib.t_formatted(f"T{{{NATIVE}i:>!<:}}".encode(), 4), "uint8"))[1:3] == (16, DT.Uint8)


def test_ctypes_big_endian_arrays():
    be = (ctypes.c_int32.__ctype_be__ if LITTLE else ctypes.c_int32.__ctype_le__) * 4
    refused(be())
    refused((be(), "uint8"))
    ne = (ctypes.c_int32.__ctype_le__ if LITTLE else ctypes.c_int32.__ctype_be__) * 4
    assert rb(ne())[1:3] == (4, DT.Int32)


def test_cuda_array_interface():
    refused(CAI(typestr=FOREIGN + "f4"), what=f"'{FOREIGN}f4'")
    refused((CAI(typestr=FOREIGN + "f4"), "float32"))
    refused((CAI(typestr=FOREIGN + "i8"), 1, DT.Uint8))
    assert rb(CAI(typestr=NATIVE + "f4"))[2] == DT.Float32
    assert rb(CAI(typestr="|u1"))[2] == DT.Uint8


def test_spec_dtype_of_foreign_order_is_refused():
    a = np.zeros(4, np.float32)
    with pytest.raises(NcclInvalid, match="Unsupported data type"):
        rb((a, np.dtype(FOREIGN + "f4")))


def test_refused_views_are_released():
    a = np.zeros(4, dtype=FOREIGN + "f4")
    before = sys.getrefcount(a)
    for _ in range(1000):
        with pytest.raises(NcclInvalid):
            rb((a, "uint8"))
    assert sys.getrefcount(a) == before
    a.resize(8, refcheck=True)  # no buffer view of it is left


def test_native_arrays_still_resolve():
    a = np.arange(4, dtype=NATIVE + "f4")
    assert rb(a, writable=True) == (a.ctypes.data, 4, DT.Float32, CPU, 0, False)
