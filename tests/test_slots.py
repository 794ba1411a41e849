"""The slots whose address the library gets as an out-parameter: PointerBox,
Comm / Window, nccl.core's Communicator (src/slot.c)."""
from __future__ import annotations

import pytest

import nccl.bindings as b


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
