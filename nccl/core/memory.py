"""``mem_alloc`` / ``mem_free``: memory from ``ncclMemAlloc``.

On a GPU library the memory is device memory returned as a cuda.core
``Buffer``: from cuda.core when it is installed (CUDA), else from nccl's
cuda.core shim on its C runtime layer (ROCm always; CUDA without cuda.core),
so neither cuda.core nor hip-python is required.  On the host backend it is
host memory returned as a :class:`HostBuffer`, usable wherever a buffer is.
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

from nccl import _nccl
from nccl import bindings as _b

__all__ = ["mem_alloc", "mem_free", "HostBuffer"]


class HostBuffer:
    """``size`` bytes of host memory from the host backend's ``ncclMemAlloc``.

    Exports a 1-D int8 view through DLPack and the buffer protocol of
    ``.memoryview()``.  ``close()`` (or ``mem_free``) gives the memory up;
    it is returned to the library (``ncclMemFree``) once no view made from it
    is left, so a view never outlives its memory.  A dropped buffer is freed
    on garbage collection."""

    def __init__(self, ptr: int, size: int):
        self._ptr = int(ptr)
        self._size = int(size)
        # Every export refers to this ctypes array (NumPy views through their
        # base, memoryviews through their export): the memory is freed when
        # the array and all of them are gone.
        self._array: Any = (ctypes.c_int8 * max(self._size, 1)).from_address(self._ptr)
        weakref.finalize(self._array, _b.mem_free, self._ptr)

    @property
    def handle(self) -> int:
        return self._ptr

    @property
    def size(self) -> int:
        return self._size

    @property
    def device_id(self) -> int:
        return -1

    is_device_accessible = False
    is_host_accessible = True

    def memoryview(self) -> memoryview:
        self._check()
        return memoryview(self._array).cast("B")[: self._size]

    def _check(self) -> None:
        if not self._ptr:
            raise RuntimeError("this buffer has been freed")

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None):
        import numpy as np

        self._check()
        arr = np.frombuffer(self._array, dtype=np.int8, count=self._size)
        kw = {} if max_version is None else {"max_version": max_version}
        return arr.__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def close(self, stream: Any = None) -> None:
        """Give the memory up (again: nothing); it is freed when no view of it is left."""
        if self._ptr:
            self._ptr = 0
            self._array = None

    def __repr__(self) -> str:
        return f"<HostBuffer: {self._size} bytes at {self._ptr:#x}>" if self._ptr else "<HostBuffer: freed>"


_mr_cache = threading.local()


def _core():
    from nccl._hip_compat import core_module

    return core_module()


def _memory_resource(device_id: int):
    core = _core()
    cache = getattr(_mr_cache, "by_device", None)
    if cache is None:
        cache = _mr_cache.by_device = {}
    key = (id(core), device_id)
    if key not in cache:
        cache[key] = _make_resource(core, device_id)
    return cache[key]


def _make_resource(core, device_id: int):
    Buffer, Device = core.Buffer, core.Device
    MemoryResource: Any = core.MemoryResource

    class NcclMemoryResource(MemoryResource):
        """cuda.core memory resource backed by ncclMemAlloc / ncclMemFree."""

        def __init__(self, dev: int):
            self._dev = dev

        def allocate(self, size, stream=None):
            prev = Device()
            Device(self._dev).set_current()
            try:
                ptr = _b.mem_alloc(size)
            finally:
                prev.set_current()
            return Buffer.from_handle(ptr=ptr, size=size, mr=self)

        def deallocate(self, ptr, size, stream=None):
            _b.mem_free(int(ptr))

        @property
        def is_device_accessible(self):
            return True

        @property
        def is_host_accessible(self):
            return False

        @property
        def device_id(self):
            return self._dev

    return NcclMemoryResource(device_id)


def mem_alloc(size: int, device: Any = None):
    """Allocate ``size`` bytes with ``ncclMemAlloc`` (see the module doc)."""
    if _nccl.library_family() == "host":
        return HostBuffer(_b.mem_alloc(size), size)
    core = _core()
    if device is None:
        dev = core.Device().device_id
    elif isinstance(device, int) and not isinstance(device, bool):
        dev = device
    else:
        dev = device.device_id
    return _memory_resource(dev).allocate(size)


def mem_free(buf: Any) -> None:
    """Free memory from :func:`mem_alloc` (same as ``buf.close()``).

    On the host backend the memory is returned to the library once no view
    exported from it (DLPack, ``memoryview()``) is left; until then the views
    stay valid."""
    buf.close()
