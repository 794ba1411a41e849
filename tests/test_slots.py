"""The slots whose address the library gets as an out-parameter: PointerBox,
Comm / Window, nccl.core's Communicator (src/slot.c)."""
from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from nccl import _nccl


class _Index:
    def __init__(self, v: int) -> None:
        self.v = v

    def __index__(self) -> int:
        return self.v


@pytest.mark.parametrize("bad, exc", [("x", TypeError), (1.5, TypeError), (None, TypeError),
                                      (2**64, OverflowError), (-(2**63) - 1, OverflowError)])
def test_refused_ptr_assignment_leaves_the_box_unchanged(bad, exc):
    box = b.PointerBox(0x1234)
    with pytest.raises(exc):
        box.ptr = bad
    assert box.ptr == 0x1234 and int(box) == 0x1234


def test_ptr_assignment_takes_what_the_constructor_takes():
    box = b.PointerBox()
    box.ptr = _Index(0x40)
    assert box.ptr == 0x40
    box.ptr = 2**64 - 1  # an unsigned address, read back signed as before
    assert box.ptr == b.PointerBox(2**64 - 1).ptr == -1
    box.ptr = -5
    assert box.ptr == -5 and int(box) == -5
    with pytest.raises(TypeError):
        del box.ptr
    assert box.ptr == -5


# ------------------------------------------- the library writes a slot late
#
# A non-blocking init returns InProgress and fills its out-parameter later,
# from the library's own thread; a creating call inside a group fills it at
# the group's end.  The recording stub returns the status the test sets and
# writes nothing (SetWriteOutputs(0)); the test then writes the address the
# call got, as the library would, after the object that held the slot is gone,
# and objects of the same type made in between must not see it.

LATE = 0x5EED0000DEAD


def _write_late(addr: int) -> None:
    ctypes.c_void_p.from_address(addr).value = LATE


def _uid() -> bytes:
    return bytes(b.UniqueId())


@pytest.fixture
def late(stub):
    stub.nccl4pyStubSetWriteOutputs(0)
    yield stub
    stub.nccl4pyStubSetWriteOutputs(1)


def _kept() -> int:
    return _nccl._slot_stats()[1]


def test_pointerbox_dropped_while_init_is_in_progress(late):
    late.nccl4pyStubSetResult(int(b.Result.InProgress))
    box = b.PointerBox()
    addr = box.address
    assert b.comm_init_rank(addr, 1, _uid(), 0) == int(b.Result.InProgress)
    del box
    others = [b.PointerBox() for _ in range(2000)]
    _write_late(addr)
    assert [o.ptr for o in others if o.ptr] == []
    assert _kept() >= 1


def test_pointerbox_dropped_inside_a_group(late):
    b.group_start()
    try:
        box = b.PointerBox()
        addr = box.address
        assert b.comm_split(0x10, 0, 0, addr, None) == 0
        del box
        others = [b.PointerBox() for _ in range(2000)]
    finally:
        b.group_end()
    _write_late(addr)  # what group_end would have written
    assert [o.ptr for o in others if o.ptr] == []


@pytest.mark.parametrize("kind", ["Comm", "Window"])
def test_hand_made_handle_dropped_while_the_library_may_write_it(late, kind):
    late.nccl4pyStubSetResult(int(b.Result.InProgress))
    cls = getattr(b, kind)
    h = cls()
    addr = h.handle_ptr
    if kind == "Comm":
        assert b.comm_init_rank(addr, 1, _uid(), 0) == int(b.Result.InProgress)
    else:
        assert b.comm_window_register(0x10, 0x2000, 64, addr, 0) == int(b.Result.InProgress)
    del h
    others = [cls() for _ in range(2000)]
    _write_late(addr)
    assert [o.handle for o in others if o] == []


def test_communicator_dropped_while_init_is_in_progress(late):
    # (no config: the stub answers every call InProgress, its ncclGetVersion
    # too, which a config's layout asks; the slot is what matters here)
    uid = nc.get_unique_id()
    late.nccl4pyStubSetResult(int(b.Result.InProgress))
    comm = nc.Communicator.init(1, 0, uid)
    addr = comm._comm_address
    assert comm.ptr == 0  # not filled yet
    del comm
    gc.collect()
    others = [nc.Communicator() for _ in range(500)]
    _write_late(addr)
    assert [o.ptr for o in others if o.ptr] == []


def test_a_slot_is_kept_only_when_the_library_may_still_write_it(stub):
    """A blocking call outside a group has written the slot when it returns:
    the box is freed with its object, and no longer counted as handed out."""
    escaped, kept = _nccl._slot_stats()
    box = b.PointerBox()
    assert b.comm_init_rank(box.address, 1, _uid(), 0) == 0
    assert box.ptr != 0 and _nccl._slot_stats() == (escaped + 1, kept)
    del box
    c = b.Comm()
    assert b.comm_init_rank(c.handle_ptr, 1, _uid(), 0) == 0 and c.handle != 0
    del c
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
    assert comm._comm_address != 0 and comm.ptr != 0
    comm.destroy()
    del comm
    gc.collect()
    assert _nccl._slot_stats() == (escaped, kept)


def test_the_address_stays_the_slot(stub):
    """What .address / .handle_ptr / _comm_address give is where the value is,
    before and after the value is set, and the same every time."""
    box = b.PointerBox(0x1234)
    addr = box.address
    assert ctypes.c_ssize_t.from_address(addr).value == 0x1234 and box.address == addr
    box.ptr = 0x99
    assert ctypes.c_ssize_t.from_address(addr).value == 0x99
    ctypes.c_ssize_t.from_address(addr).value = -7
    assert box.ptr == -7 and int(box) == -7 and f"{box:d}" == "-7"
    h = b.Comm(0x40)
    assert ctypes.c_void_p.from_address(h.handle_ptr).value == 0x40
    ctypes.c_void_p.from_address(h.handle_ptr).value = 0x80
    assert h == 0x80 and hash(h) == hash(0x80) and h.handle_ptr == h.handle_ptr
    comm = nc.Communicator()
    ctypes.c_void_p.from_address(comm._comm_address).value = 0x1000
    assert comm.ptr == 0x1000 and comm.is_valid
    comm._set_ptr(0)
    assert ctypes.c_void_p.from_address(comm._comm_address).value is None


def test_a_communicator_the_library_fills_later_is_used_with_that_handle(stub):
    """The calls of a Communicator use the handle the library wrote into its
    slot after the creating call returned (non-blocking init)."""
    uid = nc.get_unique_id()
    stub.nccl4pyStubSetWriteOutputs(0)
    stub.nccl4pyStubSetResult(int(b.Result.InProgress))
    try:
        comm = nc.Communicator.init(1, 0, uid)
    finally:
        stub.nccl4pyStubSetWriteOutputs(1)
        stub.nccl4pyStubSetResult(0)
    assert comm.ptr == 0 and not comm.is_valid
    _write_late(comm._comm_address)  # the init completes
    assert comm.ptr == LATE and comm.is_valid
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    comm.allreduce(x, y, nc.SUM)
    assert f"comm=comm:{LATE:#x}" in stub.nccl4pyStubLastCall().decode()
    comm._set_ptr(0)
