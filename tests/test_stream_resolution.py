"""Stream argument resolution (src/stream.c) through nccl._nccl.resolve_stream."""
from __future__ import annotations

import enum
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from nccl._nccl import resolve_stream as rs

ACCEPTED = ("stream must be None, an int handle, an object with __cuda_stream__(), or a stream "
            "object with .handle, .cuda_stream or .ptr (cuda.core, torch, CuPy, hip-python); got ")


class Handle(enum.IntEnum):
    S = 77


def test_none_and_ints():
    assert rs(None) == 0
    assert rs(0) == 0
    assert rs(1) == 1
    assert rs(0x7F00DEADBEEF) == 0x7F00DEADBEEF
    assert rs(2**64 - 1) == 2**64 - 1
    assert rs(-1) == 2**64 - 1  # pointer-sized, like every handle argument
    assert rs(np.int64(12)) == 12
    assert rs(np.uint64(2**63)) == 2**63
    assert rs(Handle.S) == 77
    with pytest.raises(OverflowError):
        rs(2**64)
    with pytest.raises(OverflowError):
        rs(-(2**63) - 1)


@pytest.mark.parametrize("obj", [1.0, True, "5", b"5", [5], object(), np.float32(1)])
def test_rejected(obj):
    with pytest.raises(TypeError) as e:
        rs(obj)
    assert str(e.value).startswith(ACCEPTED)
    assert str(e.value).endswith(type(obj).__name__)


class CudaStream:
    """The __cuda_stream__ protocol (cuda.core, torch >= 2.10, CuPy, numba-cuda)."""

    def __init__(self, ret):
        self.ret = ret

    def __cuda_stream__(self):
        if isinstance(self.ret, BaseException):
            raise self.ret
        return self.ret


class IntOnly:
    """cuda.bindings CUstream / hip-python ihipStream_t style: int(obj) is the handle."""

    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v


def test_cuda_stream_protocol():
    assert rs(CudaStream((0, 1234))) == 1234
    assert rs(CudaStream((0, 0))) == 0
    assert rs(CudaStream((0, IntOnly(99)))) == 99
    assert rs(CudaStream((0, np.uint64(5)))) == 5


@pytest.mark.parametrize("ret,exc,match", [
    ((1, 1234), ValueError, "returned version 1; only version 0 is supported"),
    ((2**70, 1), ValueError, "only version 0"),
    ((-1, 1), ValueError, "only version 0"),
    (("0", 1), TypeError, "version of type str, not int"),
    ((0,), TypeError, r"must return a \(version, handle\) tuple, not tuple"),
    ((0, 1, 2), TypeError, r"must return a \(version, handle\) tuple"),
    ([0, 1], TypeError, "not list"),
    (1234, TypeError, "not int"),
    ((0, "x"), TypeError, "the __cuda_stream__\\(\\) handle of CudaStream must be an int handle"),
    ((0, None), TypeError, "must be an int handle, not NoneType"),
    ((0, 1.5), TypeError, "not float"),
    ((0, 2**64), OverflowError, None),
    (RuntimeError("stream destroyed"), RuntimeError, "stream destroyed"),
])
def test_cuda_stream_protocol_errors(ret, exc, match):
    with pytest.raises(exc, match=match):
        rs(CudaStream(ret))


class CoreStream:
    """cuda.core Stream without __cuda_stream__: .handle is a CUstream-like object."""

    def __init__(self, h):
        self._h = h

    @property
    def handle(self):
        return IntOnly(self._h)


class TorchStream:
    def __init__(self, h):
        self.cuda_stream = h


class CupyStream:
    def __init__(self, h):
        self.ptr = h


class TorchStreamType:
    """Attributes declared on the type (a torch getset descriptor, a CuPy property)."""

    @property
    def cuda_stream(self):
        return 4242


class CupyStreamType:
    @property
    def ptr(self):
        return 4343


class Both:
    """The protocol wins over the attributes."""

    ptr = 1

    def __cuda_stream__(self):
        return (0, 2)


def test_attributes():
    assert rs(CoreStream(0xABC)) == 0xABC
    assert rs(TorchStream(5)) == 5  # instance attribute: probed
    assert rs(CupyStream(6)) == 6
    assert rs(TorchStreamType()) == 4242
    assert rs(CupyStreamType()) == 4343
    assert rs(SimpleNamespace(ptr=9)) == 9
    assert rs(SimpleNamespace(handle=10, ptr=11)) == 10
    assert rs(Both()) == 2
    assert rs(IntOnly(31)) == 31


def test_attribute_errors():
    class Broken:
        @property
        def handle(self):
            raise RuntimeError("no context")

    with pytest.raises(RuntimeError, match="no context"):
        rs(Broken())
    with pytest.raises(TypeError, match="cuda_stream of TorchStream must be an int handle"):
        rs(TorchStream("x"))
    with pytest.raises(TypeError, match="ptr of CupyStream must be an int handle, not float"):
        rs(CupyStream(1.0))
    with pytest.raises(OverflowError):
        rs(CupyStream(2**65))
    with pytest.raises(TypeError, match=ACCEPTED.replace("(", r"\(").replace(")", r"\)")[:40]):
        rs(SimpleNamespace(stream=5))

    class Weird:
        def __getattr__(self, name):
            raise KeyError(name)

    with pytest.raises(KeyError, match="__cuda_stream__"):
        rs(Weird())


def test_refcounts():
    objs = [CudaStream((0, 5)), CoreStream(7), TorchStream(8), CupyStreamType(), IntOnly(3),
            SimpleNamespace(ptr=4)]
    bad = CudaStream((1, 5))
    before = [sys.getrefcount(o) for o in objs + [bad]]
    for _ in range(10**5 // len(objs)):
        for o in objs:
            rs(o)
    del o
    for _ in range(10**4):
        try:
            rs(bad)
        except ValueError:
            pass
    assert [sys.getrefcount(o) for o in objs + [bad]] == before


def test_type_cache_bounded():
    for i in range(3000):
        cls = type(f"S{i}", (), {"ptr": i} if i % 2 else {"cuda_stream": i})
        assert rs(cls()) == i


def test_torch_streams():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch streams")
    s = torch.cuda.Stream()
    assert rs(s) == s.cuda_stream
