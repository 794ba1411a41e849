"""Buffer argument resolution (src/buffer.c) through nccl._nccl.resolve_buffer.

resolve_buffer(obj, name, writable) -> (ptr, count, dtype, device_type,
device_id, readonly) resolves and releases.  Hand-written DLPack producers
come from tests/producers.c (tests/dlpack_producers.py); their deleters count
calls.
"""
from __future__ import annotations

import array
import ctypes
import enum
import sys

import numpy as np
import pytest

from nccl._errors import NcclInvalid
from nccl._enums import DataType as DT
from nccl._nccl import resolve_buffer
from conftest import swallowing
from dlpack_producers import (CAI, CPU, CUDA, Deleters, LegacyProducer, Producer,
                              exchange_class, spec)

SUPPORTED_MSG = ("NCCL supports: int8, uint8, int32, uint32, int64, uint64, float16, float32, "
                 "float64, bfloat16, float8_e4m3fn, float8_e5m2 (bool as uint8)")
NOT_CONTIG = r"is not contiguous in row-major \(C\) order"


def rb(obj, name="buf", writable=False):
    return resolve_buffer(obj, name, writable)


# ------------------------------------------------------------- NumPy host

NUMPY_TYPES = [
    (np.int8, DT.Int8), (np.uint8, DT.Uint8), (np.int32, DT.Int32), (np.uint32, DT.Uint32),
    (np.int64, DT.Int64), (np.uint64, DT.Uint64), (np.float16, DT.Float16),
    (np.float32, DT.Float32), (np.float64, DT.Float64), (np.bool_, DT.Uint8),
    (np.intc, DT.Int32), (np.uintc, DT.Uint32), (np.longlong, DT.Int64),
    (np.ulonglong, DT.Uint64), (np.intp, DT.Int64), (np.uintp, DT.Uint64),
]


@pytest.mark.parametrize("np_type,want", NUMPY_TYPES, ids=lambda x: getattr(x, "__name__", ""))
def test_numpy_dtypes(np_type, want):
    a = np.zeros((3, 5), dtype=np_type)
    assert rb(a) == (a.ctypes.data, 15, want, CPU, 0, False)
    assert rb(a, writable=True) == (a.ctypes.data, 15, want, CPU, 0, False)


def test_numpy_zero_dim_and_offset_views():
    a = np.arange(10, dtype=np.float32)
    assert rb(np.array(2.5))[1:] == (1, DT.Float64, CPU, 0, False)
    assert rb(a[3:7])[:2] == (a.ctypes.data + 12, 4)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)])
def test_zero_size(shape):
    a = np.zeros(shape, np.float32)
    assert rb(a)[1:3] == (0, DT.Float32)
    assert rb(np.zeros((4, 0))[::2])[1] == 0


def test_fortran_order_and_transposes_refused():
    """Contiguous, but the flat memory order is not the element order (more in
    test_layout.py)."""
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(np.asfortranarray(np.zeros((3, 4), np.float64)), writable=True)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(np.zeros((3, 4), np.int32).T)
    assert rb(np.zeros((1, 5))[:, ::1])[1] == 5
    assert rb(np.zeros((1, 5)).T)[1] == 5  # only size-1 dimensions differ
    assert rb(np.zeros((5, 1, 3))[:, :, :])[1] == 15
    assert rb(np.zeros((4, 1))[::1, ::3])[1] == 4  # a stride on a size-1 dimension


NON_CONTIGUOUS = {
    "step": lambda: np.arange(10.0)[::2],
    "step_2d": lambda: np.zeros((4, 6))[:, ::2],
    "column": lambda: np.zeros((4, 6))[:, 1],
    "row_block": lambda: np.zeros((4, 6))[1:3, 1:5],
    "transpose_3d": lambda: np.zeros((2, 3, 4)).transpose(1, 0, 2),
    "broadcast": lambda: np.broadcast_to(np.arange(3.0), (4, 3)),
    "broadcast_scalar": lambda: np.broadcast_to(np.float32(1), (5,)),
    "negative": lambda: np.arange(10.0)[::-1],
    "negative_2d": lambda: np.zeros((3, 3))[::-1],
    "overlapping": lambda: np.lib.stride_tricks.as_strided(np.zeros(10), (4, 4), (8, 8)),
}


@pytest.mark.parametrize("kind", sorted(NON_CONTIGUOUS))
def test_non_contiguous(kind):
    with pytest.raises(NcclInvalid, match=f"^recvbuf {NOT_CONTIG}"):
        rb(NON_CONTIGUOUS[kind](), "recvbuf")


def test_read_only():
    a = np.zeros(4, np.float32)
    a.setflags(write=False)
    assert rb(a)[5] is True
    with pytest.raises(NcclInvalid, match="^recvbuf is read-only"):
        rb(a, "recvbuf", True)
    with pytest.raises(NcclInvalid, match="^out is read-only"):
        rb(b"abcd", "out", True)
    assert rb(b"abcd") [1:] == (4, DT.Uint8, CPU, 0, True)


@pytest.mark.parametrize("np_type,label", [
    (np.int16, "int16"), (np.uint16, "uint16"), (np.complex64, "complex64"),
    (np.complex128, "complex128"), (np.longdouble, "longdouble"), (object, "object")])
def test_unsupported_numpy(np_type, label):
    with pytest.raises(NcclInvalid) as e:
        rb(np.zeros(3, np_type), "sendbuf")
    msg = str(e.value)
    assert msg.startswith(f"Unsupported data type for sendbuf: {label}")
    assert msg.endswith(SUPPORTED_MSG)


def test_non_native_byte_order():  # more in test_buffer_byte_order.py
    with pytest.raises(NcclInvalid, match="non-native byte order"):
        rb(np.zeros(3, ">f4" if sys.byteorder == "little" else "<f4"))
    assert rb(np.zeros(3, "|u1"))[2] == DT.Uint8


def test_other_buffer_exporters():
    ba = bytearray(7)
    assert rb(ba, writable=True)[1:] == (7, DT.Uint8, CPU, 0, False)
    d = array.array("d", [1.0, 2.0])
    assert rb(d)[1:3] == (2, DT.Float64)
    assert rb(array.array("i", [1]))[2] == DT.Int32
    assert rb(array.array("L", [1]))[2] == DT.Uint64
    assert rb(memoryview(ba)[:4].cast("f"))[1:3] == (1, DT.Float32)
    assert rb((ctypes.c_int64 * 3)())[1:3] == (3, DT.Int64)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(memoryview(ba)[::2])
    with pytest.raises(NcclInvalid, match="int16"):
        rb(array.array("h", [1]))
    released = memoryview(ba)
    released.release()
    with pytest.raises(ValueError, match="released"):
        rb(released)


# ------------------------------------------------------------ ml_dtypes

@pytest.fixture
def ml_dtypes():
    """ml_dtypes (in the test extra); only the tests that use it skip without it."""
    return pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("name,want", [("bfloat16", DT.Bfloat16),
                                       ("float8_e4m3fn", DT.Float8e4m3),
                                       ("float8_e5m2", DT.Float8e5m2)])
def test_ml_dtypes(name, want, ml_dtypes):
    a = np.zeros((2, 3), getattr(ml_dtypes, name))
    assert rb(a, writable=True) == (a.ctypes.data, 6, want, CPU, 0, False)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(np.asfortranarray(a))
    a.setflags(write=False)
    assert rb(a)[5] is True
    with pytest.raises(NcclInvalid, match="^r is read-only"):
        rb(a, "r", True)
    with pytest.raises(NcclInvalid, match=f"^s {NOT_CONTIG}"):
        rb(np.zeros(8, getattr(ml_dtypes, name))[::2], "s")


def test_ml_dtypes_unsupported(ml_dtypes):
    with pytest.raises(NcclInvalid, match="Unsupported data type for b: float8_e4m3fnuz"):
        rb(np.zeros(2, ml_dtypes.float8_e4m3fnuz), "b")
    with pytest.raises(NcclInvalid, match="Unsupported data type for b: int4"):
        rb(np.zeros(2, ml_dtypes.int4), "b")


def test_datetime_goes_through_array_interface_and_fails_cleanly():
    with pytest.raises(NcclInvalid, match="Unsupported data type"):
        rb(np.zeros(2, "datetime64[ns]"))


# ------------------------------------------------------ DLPack capsules

@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("cls", [Producer, LegacyProducer])
def test_dlpack_capsule(lib, versioned, cls):
    d = Deleters(lib)
    p = cls(lib, data=0x10000, shape=(2, 3), offset=16, versioned=versioned, device=(CUDA, 3))
    assert rb(p, writable=True) == (0x10000 + 16, 6, DT.Float32, CUDA, 3, False)
    assert d.calls == 1


DLPACK_TYPES = [((0, 8), DT.Int8), ((1, 8), DT.Uint8), ((0, 32), DT.Int32),
                ((1, 32), DT.Uint32), ((0, 64), DT.Int64), ((1, 64), DT.Uint64),
                ((2, 16), DT.Float16), ((2, 32), DT.Float32), ((2, 64), DT.Float64),
                ((4, 16), DT.Bfloat16), ((10, 8), DT.Float8e4m3), ((12, 8), DT.Float8e5m2),
                ((6, 8), DT.Uint8)]


@pytest.mark.parametrize("code_bits,want", DLPACK_TYPES)
def test_dlpack_dtypes(lib, code_bits, want):
    d = Deleters(lib)
    p = Producer(lib, code=code_bits[0], bits=code_bits[1], shape=(5,))
    assert rb(p)[1:3] == (5, want)
    assert d.calls == 1


@pytest.mark.parametrize("code,bits,lanes,label", [
    (0, 16, 1, "int16"), (1, 16, 1, "uint16"), (5, 64, 1, "complex64"), (2, 32, 2, "float32 x 2"),
    (11, 8, 1, "float8_e4m3fnuz"), (3, 64, 1, "opaque64"), (17, 4, 1, "float4_e2m1fn"),
    (99, 8, 1, "DLPack type code 99"), (2, 8, 1, "float8 ")])
@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_unsupported_dtype(lib, code, bits, lanes, label, versioned):
    d = Deleters(lib)
    with pytest.raises(NcclInvalid) as e:
        rb(Producer(lib, code=code, bits=bits, lanes=lanes, versioned=versioned), "x")
    assert str(e.value).startswith(f"Unsupported data type for x: {label}")
    assert str(e.value).endswith(SUPPORTED_MSG)
    assert d.calls == 1


@pytest.mark.parametrize("shape,strides,ok", [
    ((2, 3), (3, 1), True),         # row-major
    ((2, 3), (1, 2), False),        # column-major
    ((2, 1, 3), (3, 99, 1), True),  # size-1 dimension: any stride
    ((1,), (7,), True),
    ((0, 3), (5, 9), True),         # empty
    ((), (), True),                 # 0-d
    ((2, 3), (6, 2), False),
    ((2, 3), (0, 1), False),        # broadcast
    ((4,), (-1,), False),           # negative
    ((2, 2), (1, 1), False),        # overlapping
    ((2, 3, 4), (4, 8, 1), False),  # permuted
])
def test_dlpack_strides(lib, shape, strides, ok):
    d = Deleters(lib)
    p = Producer(lib, shape=shape, strides=strides)
    if ok:
        count = int(np.prod(shape))
        assert rb(p)[1] == count
    else:
        with pytest.raises(NcclInvalid, match=f"^b {NOT_CONTIG}"):
            rb(p, "b")
    assert d.calls == 1


def test_dlpack_read_only_flag(lib):
    d = Deleters(lib)
    p = Producer(lib, flags=1)
    assert rb(p)[5] is True
    with pytest.raises(NcclInvalid, match="^recv is read-only"):
        rb(p, "recv", True)
    assert rb(Producer(lib, flags=2))[5] is False  # IS_COPIED only
    assert d.calls == 3


@pytest.mark.parametrize("major", [0, 2])
def test_dlpack_version_mismatch(lib, major):
    d = Deleters(lib)
    with pytest.raises(NcclInvalid, match=rf"^b: DLPack version {major}\.1 is not supported"):
        rb(Producer(lib, major=major), "b")
    assert d.calls == 1


def test_dlpack_bad_shape(lib):
    d = Deleters(lib)
    with pytest.raises(NcclInvalid, match="invalid DLPack tensor"):
        rb(Producer(lib, shape=(2, -3)))
    with pytest.raises(NcclInvalid, match="invalid DLPack tensor"):
        rb(Producer(lib, shape=(2**40, 2**40)))
    assert d.calls == 2


def test_dlpack_wrong_capsule_name(lib):
    d = Deleters(lib)
    with pytest.raises(TypeError, match="capsule named 'bogus', expected 'dltensor_versioned'"):
        rb(Producer(lib, name="bogus"), "b")
    assert d.calls == 1  # by the unconsumed capsule's destructor


class Returns:
    def __init__(self, value):
        self.value = value

    def __dlpack__(self, **kw):
        return self.value


class Raises:
    def __dlpack__(self, **kw):
        raise RuntimeError("producer failure")


class RaisesTypeErrorAlways:
    calls = 0

    def __dlpack__(self, *a, **kw):
        RaisesTypeErrorAlways.calls += 1
        raise TypeError("nope")


def test_dlpack_producer_errors(lib):
    d = Deleters(lib)
    with pytest.raises(RuntimeError, match="producer failure"):
        rb(Raises())
    with pytest.raises(TypeError, match=r"^b.__dlpack__\(\) returned int, not a DLPack capsule"):
        rb(Returns(5), "b")
    with pytest.raises(TypeError, match="capsule named"):
        import datetime  # its C API is a capsule named "datetime.datetime_CAPI"
        rb(Returns(datetime.datetime_CAPI))
    assert d.calls == 0
    RaisesTypeErrorAlways.calls = 0
    with pytest.raises(TypeError, match="nope"):
        rb(RaisesTypeErrorAlways())
    assert RaisesTypeErrorAlways.calls == 2  # with max_version, then without


def test_dlpack_used_capsule(lib):
    d = Deleters(lib)
    cap = lib.t_make_capsule(spec())
    r = Returns(cap)
    assert rb(r)[1] == 4
    assert d.calls == 1
    with pytest.raises(TypeError, match="already consumed"):
        rb(r)
    del r, cap
    assert d.calls == 1


def test_dlpack_host_device_and_size_zero(lib):
    d = Deleters(lib)
    assert rb(Producer(lib, data=0, shape=(0,), device=(CPU, 0))) == (0, 0, DT.Float32, CPU, 0,
                                                                      False)
    assert rb(Producer(lib, device=(10, 1)))[3:5] == (10, 1)  # ROCm
    assert d.calls == 2


def test_numpy_dlpack_through_a_wrapper():
    """NumPy's own __dlpack__ (versioned capsules, stream=None only)."""
    class Wrap:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert rb(Wrap(a), writable=True) == (a.ctypes.data, 12, DT.Float32, CPU, 0, False)
    ro = a.copy()
    ro.setflags(write=False)
    assert rb(Wrap(ro))[5] is True
    with pytest.raises(NcclInvalid, match="read-only"):
        rb(Wrap(ro), "r", True)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(Wrap(a[:, ::2]))
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(Wrap(a.T))
    assert rb(Wrap(np.zeros(3, bool)))[2] == DT.Uint8


# ------------------------------------------------------- exchange API

@pytest.mark.parametrize("which,legacy,owning", [(0, False, False), (1, False, True),
                                                 (2, False, False), (0, True, False),
                                                 (1, True, True)])
def test_exchange_api(lib, which, legacy, owning):
    cls = exchange_class(lib, which, legacy)
    d = Deleters(lib)
    obj = cls(data=0x2000, shape=(3, 2), strides=(2, 1), code=4, bits=16, offset=8)
    assert rb(obj, writable=True) == (0x2008, 6, DT.Bfloat16, CUDA, 3, False)
    assert d.calls == (1 if owning else 0)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(cls(shape=(3, 2), strides=(1, 1)))
    with pytest.raises(NcclInvalid, match="int16"):
        rb(cls(code=0, bits=16))
    assert d.calls == (3 if owning else 0)
    before = sys.getrefcount(obj)
    for _ in range(1000):
        rb(obj)
    assert sys.getrefcount(obj) == before


def test_exchange_api_read_only_and_errors(lib):
    d = Deleters(lib)
    managed = exchange_class(lib, 1)
    with pytest.raises(NcclInvalid, match="read-only"):
        rb(managed(flags=1), "r", True)
    with pytest.raises(NcclInvalid, match="DLPack version 2.1"):
        rb(managed(major=2))
    assert d.calls == 2
    obj = managed()
    del obj._dl
    with pytest.raises(AttributeError):
        rb(obj)
    silent = exchange_class(lib, 3)
    with pytest.raises(RuntimeError, match="managed_tensor_from_py_object_no_sync failed"):
        rb(silent())
    # a table of an unknown major version with no 1.x fallback is ignored
    with pytest.raises(TypeError, match="must be an array"):
        rb(exchange_class(lib, 4)())
    assert d.calls == 2


def test_exchange_api_wins_over_dlpack(lib):
    cls = exchange_class(lib, 0)
    cls.__dlpack__ = lambda self, **kw: 1 / 0
    assert rb(cls())[1] == 4


# -------------------------------------------- __cuda_array_interface__

def test_cai_basic():
    assert rb(CAI(), writable=True) == (0x3000, 6, DT.Float32, CUDA, -1, False)
    assert rb(CAI(strides=None))[1] == 6
    assert rb(CAI(strides=(12, 4)))[1] == 6
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(CAI(strides=(4, 8)))  # Fortran order
    assert rb(CAI(version=2))[1] == 6
    assert rb(CAI(mask=None, stream=1))[1] == 6
    assert rb(CAI(shape=(0,), data=(0, False)))[:2] == (0, 0)
    assert rb(CAI(typestr="|b1"))[2] == DT.Uint8
    assert rb(CAI(typestr="<f2"))[2] == DT.Float16
    assert rb(CAI(typestr="|u1"))[2] == DT.Uint8
    assert rb(CAI(typestr="|i1"))[2] == DT.Int8
    assert rb(CAI(typestr="<u8"))[2] == DT.Uint64
    assert rb(CAI(data=(2**64 - 8, False)))[0] == 2**64 - 8
    ro = CAI(data=(0x3000, True))
    assert rb(ro)[5] is True
    with pytest.raises(NcclInvalid, match="^recv is read-only"):
        rb(ro, "recv", True)


@pytest.mark.parametrize("fields,exc,match", [
    ({"strides": (8, 4)}, NcclInvalid, NOT_CONTIG),
    ({"strides": (0, 4)}, NcclInvalid, NOT_CONTIG),
    ({"strides": (12, -4)}, NcclInvalid, NOT_CONTIG),
    ({"version": 1}, NcclInvalid, "version 1 is not supported"),
    ({"version": 4}, NcclInvalid, "version 4 is not supported"),
    ({"version": KeyError}, TypeError, "'version' must be an int"),
    ({"mask": object()}, NcclInvalid, "masked arrays are not supported"),
    ({"data": KeyError}, TypeError, "'data' must be a"),
    ({"data": 0x3000}, TypeError, "'data' must be a"),
    ({"data": (0x3000,)}, TypeError, "'data' must be a"),
    ({"data": ("0", False)}, TypeError, "'data' must be a"),
    ({"shape": KeyError}, TypeError, "'shape' is missing"),
    ({"shape": [2, 3]}, TypeError, "'shape' must be a tuple of ints"),
    ({"shape": (2, 3.0)}, TypeError, "'shape' must be a tuple of ints"),
    ({"shape": (2, -3)}, TypeError, "negative"),
    ({"strides": (4,)}, TypeError, "differ in length"),
    ({"strides": [12, 4]}, TypeError, "'strides' must be a tuple"),
    ({"typestr": KeyError}, TypeError, "'typestr' must be a str"),
    ({"typestr": 5}, TypeError, "'typestr' must be a str"),
    ({"typestr": "<c8"}, NcclInvalid, "Unsupported data type for b: complex64"),
    ({"typestr": "<i2"}, NcclInvalid, "Unsupported data type for b: int16"),
    ({"typestr": "<V2"}, NcclInvalid, "Unsupported data type for b: typestr '<V2'"),
    ({"typestr": ">f4" if sys.byteorder == "little" else "<f4"}, NcclInvalid,
     "^b has non-native byte order"),
    ({"typestr": "f4"}, NcclInvalid, "Unsupported data type"),
    ({"typestr": "<f"}, NcclInvalid, "Unsupported data type"),
])
def test_cai_errors(fields, exc, match):
    with pytest.raises(exc, match=match):
        rb(CAI(**fields), "b")


def test_cai_not_a_dict_and_raising_property():
    class NotDict:
        __cuda_array_interface__ = [1, 2]

    with pytest.raises(TypeError, match="__cuda_array_interface__ must be a dict"):
        rb(NotDict())

    class Boom:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("device lost")

    with pytest.raises(RuntimeError, match="device lost"):
        rb(Boom())


def test_instance_level_protocols(lib):
    class Plain:
        pass

    o = Plain()
    o.__cuda_array_interface__ = CAI().d
    assert rb(o)[:4] == (0x3000, 6, DT.Float32, CUDA)
    o2 = Plain()
    o2.__array_interface__ = CAI().d
    assert rb(o2)[:4] == (0x3000, 6, DT.Float32, CPU)
    o3 = Plain()
    o3.__dlpack__ = Producer(lib).__dlpack__
    assert rb(o3)[1] == 4
    with pytest.raises(TypeError, match="must be an array"):
        rb(Plain())


def test_array_interface_only_object():
    a = np.arange(6, dtype=np.int64)

    class AI:
        @property
        def __array_interface__(self):
            return a.__array_interface__

    assert rb(AI()) == (a.ctypes.data, 6, DT.Int64, CPU, 0, False)


def test_dlpack_preferred_over_cai(lib):
    class Both(Producer):
        @property
        def __cuda_array_interface__(self):
            raise AssertionError("not reached")

    assert rb(Both(lib))[1] == 4


# ------------------------------------------------------- no protocol

@pytest.mark.parametrize("obj", [5, 2.0, "abc", None, [1, 2], {"a": 1}, object()])
def test_no_protocol(obj):
    with pytest.raises(TypeError) as e:
        rb(obj, "sendbuf")
    assert str(e.value) == (
        "sendbuf must be an array: an object supporting DLPack, the buffer protocol, "
        "__cuda_array_interface__, or an explicit (buffer, count, dtype) spec; got "
        + type(obj).__name__)


def test_attribute_access_raising():
    class Weird:
        def __getattr__(self, name):
            raise RuntimeError(f"no {name} for you")

    with pytest.raises(RuntimeError, match="no __dlpack__ for you"):
        rb(Weird())

    class DlpackProperty:
        @property
        def __dlpack__(self):
            raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        rb(DlpackProperty())


def test_hook_arguments():
    a = np.zeros(2, np.float32)
    assert resolve_buffer(a)[1] == 2
    assert resolve_buffer(a, writable=True)[1] == 2
    assert resolve_buffer(obj=a, name="x")[1] == 2
    with pytest.raises(TypeError):
        resolve_buffer()
    with pytest.raises(TypeError):
        resolve_buffer(a, 5)
    with pytest.raises(NcclInvalid, match="^my arg is not contiguous"):
        resolve_buffer(np.zeros(4)[::2], name="my arg")


# --------------------------------------------------------- explicit specs

class Color(enum.IntEnum):
    RED = 7


def test_specs_count_and_dtype(ml_dtypes):
    a = np.zeros(10, np.float32)
    p = a.ctypes.data
    assert rb((a, 5)) == (p, 5, DT.Float32, CPU, 0, False)
    assert rb((a, 0))[1] == 0
    assert rb((a, np.int64(3)))[1] == 3  # an integer that is not an int subclass: a count
    assert rb((a, DT.Float16))[1:3] == (20, DT.Float16)  # an IntEnum: a dtype
    assert rb((a, Color.RED))[1:3] == (10, DT.Float32)
    assert rb((a, np.uint8))[1:3] == (40, DT.Uint8)
    assert rb((a, np.dtype("float64")))[1:3] == (5, DT.Float64)
    assert rb((a, "int8"))[1:3] == (40, DT.Int8)
    assert rb((a, "f2"))[1:3] == (20, DT.Float16)
    assert rb((a, bool))[1:3] == (40, DT.Uint8)
    assert rb((a, ml_dtypes.bfloat16))[1:3] == (20, DT.Bfloat16)
    assert rb((a, "float8_e5m2"))[1:3] == (40, DT.Float8e5m2)
    assert rb((a, 3, "int8"))[1:3] == (3, DT.Int8)
    assert rb((a, None, 0))[1:3] == (40, DT.Int8)
    assert rb((a, 4, None))[1:3] == (4, DT.Float32)
    assert rb((a, 40, DT.Uint8))[1:3] == (40, DT.Uint8)

    class IntOnly:
        def __int__(self):
            return 4

    with pytest.raises(TypeError, match="cannot be a IntOnly"):
        rb((a, IntOnly()))  # __int__ without __index__ is not an integer


def test_specs_reinterpret_unsupported_element_types(ml_dtypes):
    c = np.zeros(4, np.complex64)
    assert rb((c, "float32"))[1:3] == (8, DT.Float32)
    assert rb((np.zeros(3, np.int16), np.uint8))[1:3] == (6, DT.Uint8)
    with pytest.raises(NcclInvalid, match="6 bytes are not a whole number of float32"):
        rb((np.zeros(3, np.int16), np.float32))
    assert rb((np.zeros(2, ml_dtypes.float8_e4m3fnuz), "uint8"))[1:3] == (2, DT.Uint8)


def test_specs_keep_checks():
    a = np.zeros(10, np.float32)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb((a[::2], 2))
    ro = a.copy()
    ro.setflags(write=False)
    with pytest.raises(NcclInvalid, match="^r is read-only"):
        rb((ro, 2), "r", True)
    with pytest.raises(NcclInvalid, match="Unsupported data type"):
        rb((np.zeros(3, np.int16), 2))


@pytest.mark.parametrize("bad,exc,match", [
    (lambda a: (a, 11), NcclInvalid, "^b: count 11 exceeds the buffer's 10 float32 elements"),
    (lambda a: (a, 41, "int8"), NcclInvalid, "count 41 exceeds the buffer's 40 int8"),
    (lambda a: (a[:7], "float64"), NcclInvalid,
     "28 bytes are not a whole number of float64 elements"),
    (lambda a: (a, -1), OverflowError, None),
    (lambda a: (a, 2.0, "int8"), TypeError, None),
    (lambda a: (a, True), TypeError, "bool"),
    (lambda a: (a, 1, True), TypeError, "bool"),
    (lambda a: (a, 1.5), TypeError, "float"),
    (lambda a: (a, 99), NcclInvalid, "exceeds"),  # 99 elements > 10
    (lambda a: (a, 1, 99), NcclInvalid, "99 is not an NCCL data type"),
    (lambda a: (a, 1, -1), NcclInvalid, "-1 is not an NCCL data type"),
    (lambda a: (a, "complex64"), NcclInvalid, "Unsupported data type: 'complex64'"),
    (lambda a: (a, np.int16), NcclInvalid, "Unsupported data type"),
    (lambda a: (a, "nonsense"), NcclInvalid, "Unsupported data type"),
    (lambda a: (a, object()), NcclInvalid, "Unsupported data type"),
    (lambda a: ((a, 3), 3), TypeError, "cannot be a tuple"),
    (lambda a: (a,), TypeError, "got a tuple of 1 items"),
    (lambda a: (), TypeError, "got a tuple of 0 items"),
    (lambda a: (a, 1, "int8", 0), TypeError, "got a tuple of 4 items"),
    (lambda a: (5, 1), TypeError, "must be an array"),
])
def test_spec_errors(bad, exc, match):
    with pytest.raises(exc, match=match):
        rb(bad(np.zeros(10, np.float32)), "b")


def test_spec_dlpack_errors_call_deleter_once(lib):
    d = Deleters(lib)
    with pytest.raises(NcclInvalid, match="exceeds"):
        rb((Producer(lib, shape=(4,)), 5))
    assert d.calls == 1
    assert rb((Producer(lib, code=5, bits=64, shape=(4,)), "float32"))[1:3] == (8, DT.Float32)
    assert d.calls == 2


# --------------------------------------------------------------- refcounts

def _loop(fn, n=10**5):
    for _ in range(n):
        fn()


def test_refcounts_numpy(ml_dtypes):
    a = np.zeros(16, np.float32)
    ro = a.copy()
    ro.setflags(write=False)
    objs = [a, ro, np.zeros(16, ml_dtypes.bfloat16), a[::2]]
    before = [sys.getrefcount(o) for o in objs]
    _loop(lambda: rb(a))
    _loop(lambda: rb((a, 4, "int8")))
    _loop(lambda: rb(objs[2]), 10**4)
    _loop(swallowing(lambda: rb(ro, "r", True), NcclInvalid), 10**4)
    _loop(swallowing(lambda: rb(objs[3]), NcclInvalid), 10**4)
    _loop(swallowing(lambda: rb((a, 11)), NcclInvalid), 10**4)
    assert [sys.getrefcount(o) for o in objs] == before


def test_refcounts_producers(lib):
    d = Deleters(lib)
    p = Producer(lib)
    bad = Producer(lib, code=0, bits=16)
    cai = CAI()
    ro = CAI(data=(0x3000, True))
    objs = [p, bad, cai, cai.d, ro, ro.d]
    before = [sys.getrefcount(o) for o in objs]
    _loop(lambda: rb(p), 10**5)
    _loop(swallowing(lambda: rb(bad), NcclInvalid), 10**4)
    _loop(lambda: rb(cai), 10**4)
    _loop(swallowing(lambda: rb(ro, "r", True), NcclInvalid), 10**4)
    assert [sys.getrefcount(o) for o in objs] == before
    assert d.calls == 10**5 + 10**4


def test_type_cache_is_bounded_and_keeps_types_correct():
    for i in range(3000):
        cls = type(f"T{i}", (), {"__cuda_array_interface__": CAI().d} if i % 2
                   else {"__array_interface__": CAI().d})
        assert rb(cls())[3] == (CUDA if i % 2 else CPU)


# ------------------------------------------------------------------- torch

def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed (optional: CPU tensors and the DLPack exchange API)")
    return torch


def test_torch_cpu_tensors():
    torch = _torch()
    for dt, want in [(torch.float32, DT.Float32), (torch.float16, DT.Float16),
                     (torch.bfloat16, DT.Bfloat16), (torch.int8, DT.Int8),
                     (torch.uint8, DT.Uint8), (torch.int32, DT.Int32), (torch.int64, DT.Int64),
                     (torch.float64, DT.Float64), (torch.bool, DT.Uint8)]:
        t = torch.zeros(3, 4, dtype=dt)
        assert rb(t, writable=True) == (t.data_ptr(), 12, want, CPU, 0, False)
    for dt, want in [("float8_e4m3fn", DT.Float8e4m3), ("float8_e5m2", DT.Float8e5m2)]:
        if hasattr(torch, dt):
            assert rb(torch.zeros(4, dtype=getattr(torch, dt)))[2] == want
    with pytest.raises(NcclInvalid, match="int16"):
        rb(torch.zeros(3, dtype=torch.int16))
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(torch.zeros(4, 4)[:, ::2])
    t = torch.zeros(4, 6)
    with pytest.raises(NcclInvalid, match=NOT_CONTIG):
        rb(t.t())
    assert rb(t[1:3])[0] == t.data_ptr() + 6 * 4
    before = sys.getrefcount(t)
    _loop(lambda: rb(t), 10**4)
    assert sys.getrefcount(t) == before


def test_torch_exchange_api_is_used():
    torch = _torch()
    if not (hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
            or hasattr(torch.Tensor, "__c_dlpack_exchange_api__")):
        pytest.skip("this torch has no DLPack C exchange API")
    t = torch.zeros(5)
    orig = torch.Tensor.__dlpack__
    try:
        torch.Tensor.__dlpack__ = lambda *a, **k: 1 / 0  # must not be called
        assert rb(t)[:2] == (t.data_ptr(), 5)
    finally:
        torch.Tensor.__dlpack__ = orig
