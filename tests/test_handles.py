"""Comm and Window: the 0.5+ handle objects, usable wherever 0.2 code used ints."""
from __future__ import annotations

import ctypes
import pickle

import pytest

from nccl import bindings
from nccl.bindings import Comm, Window


@pytest.mark.parametrize("cls", [Comm, Window])
def test_slot_is_live_and_stable(cls):
    h = cls()
    assert h.handle == 0 and not h
    slot = h.handle_ptr
    ctypes.c_void_p.from_address(slot).value = 0xC0FFEE  # what the library does
    assert h.handle == 0xC0FFEE and h and int(h) == 0xC0FFEE
    assert h.handle_ptr == slot


@pytest.mark.parametrize("cls", [Comm, Window])
def test_upstream_surface(cls):
    h = cls(handle=0x1234)
    assert h.handle == 0x1234
    assert type(h).__module__ == "nccl.bindings.nccl"
    assert repr(h).startswith(f"<nccl.bindings.nccl.{cls.__name__} handle=0x1234 object at 0x")
    assert cls(-1).handle == -1
    with pytest.raises(AttributeError):
        h.handle = 5  # type: ignore[misc]

    class Sub(cls):  # type: ignore[misc, valid-type]
        pass

    assert Sub(7).handle == 7


def test_behaves_as_the_integer_it_holds():
    c = Comm(0x1000)
    assert c == 0x1000 and 0x1000 == c and c == Comm(0x1000) and c != 0x1001
    assert c < 0x1001 and c >= 0x1000
    assert hash(c) == hash(0x1000) and {0x1000: "x"}[c] == "x"
    assert c + 8 == 0x1008 and type(c + 8) is int and 0x2000 - c == 0x1000
    assert c & 0xF00 == 0 and c | 1 == 0x1001 and c >> 4 == 0x100 and c // 2 == 0x800
    assert hex(c) == "0x1000" and f"{c:x}" == "1000" and [0, 1, 2][Comm(2)] == 2
    assert pickle.loads(pickle.dumps(c)) == c


def test_non_integers_refused():
    with pytest.raises(TypeError):
        Comm(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Comm(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Comm(0) + 1.5  # type: ignore[operator]
    assert Comm(3) != "3"


def test_accepted_where_an_int_handle_is(recording_stub):
    # A handle object passes its current value to the library as an int would.
    recording_stub.nccl4pyStubReset()
    bindings.comm_abort(Comm(0x5678))
    with_object = recording_stub.nccl4pyStubLastCall().decode()
    bindings.comm_abort(0x5678)
    assert recording_stub.nccl4pyStubLastCall().decode() == with_object
    assert "0x5678" in with_object
