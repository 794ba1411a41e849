"""``MemorySpan``: the read-only ``handle`` and ``size`` of an object that
keeps its address in ``_ptr`` and its length in ``_size`` (the cuda.core
shim's ``Buffer``, ``nccl.core``'s ``HostBuffer``)."""
from __future__ import annotations


class MemorySpan:
    """``handle`` (the address) and ``size`` (bytes), read-only.  Slotted
    empty, so that a slotted subclass stays slotted."""

    __slots__ = ()
    _ptr: int
    _size: int

    @property
    def handle(self) -> int:
        return self._ptr

    @property
    def size(self) -> int:
        return self._size
