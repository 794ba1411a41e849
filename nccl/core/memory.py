"""``mem_alloc`` / ``mem_free`` and ``NcclMemoryResource``: memory from ``ncclMemAlloc``.

On a GPU library the memory is device memory returned as a cuda.core
``Buffer``: from cuda.core when it is installed (CUDA), else from nccl's
cuda.core shim on its C runtime layer (ROCm always; CUDA without cuda.core),
so neither cuda.core nor hip-python is required.  ``NcclMemoryResource`` is
the cuda.core memory resource behind it (usable wherever cuda.core takes
one), ``get_memory_resource(device_id)`` this thread's instance for a
device.  On the host backend ``mem_alloc`` returns host memory as a
:class:`HostBuffer`, usable wherever a buffer is; ``NcclMemoryResource``
refuses to be made there (NotImplementedError).
"""
from __future__ import annotations

import ctypes
import operator
import threading
import weakref
from typing import Any

from nccl import _nccl
from nccl import bindings as _b
from nccl._memspan import MemorySpan

from .cuda import CudaDeviceContext, get_device_id

__all__ = ["NcclMemoryResource", "get_memory_resource", "mem_alloc", "mem_free", "HostBuffer"]


class HostBuffer(MemorySpan):
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


# --------------------------------------------------- cuda.core memory resource
#
# NcclMemoryResource subclasses the MemoryResource of the cuda.core in use: the
# real cuda.core, or nccl's shim of it (ROCm; CUDA without cuda.core).  Which
# one is known only when it is first needed, so the class is made then, once
# per cuda.core module, and the module attribute is resolved lazily:
# ``import nccl.core`` imports no cuda.core.

_classes: dict[Any, type] = {}
_classes_lock = threading.Lock()
_per_thread = threading.local()


def _core():
    from nccl._hip_compat import core_module

    return core_module()


def _resource_class() -> type:
    core = _core()
    cls = _classes.get(core)
    if cls is None:
        with _classes_lock:
            cls = _classes.get(core)
            if cls is None:
                cls = _classes[core] = _make_resource_class(core)
    return cls


def _device_id(device_id: Any) -> int:
    if isinstance(device_id, bool):
        raise TypeError("device_id must be an int, not bool")
    try:
        return operator.index(device_id)
    except TypeError:
        raise TypeError(f"device_id must be an int, not {type(device_id).__name__}") from None


def _make_resource_class(core: Any) -> type:
    Buffer, Device = core.Buffer, core.Device
    MemoryResource: Any = core.MemoryResource

    class NcclMemoryResource(MemoryResource):
        """A cuda.core memory resource whose buffers come from ``ncclMemAlloc``
        on one device (and go back through ``ncclMemFree``).

        ``NcclMemoryResource(device_id)``; ``allocate(size, stream=None)``
        returns a cuda.core ``Buffer`` of device memory.  The host backend has
        no device memory: there the constructor raises NotImplementedError
        (``nccl.core.mem_alloc`` returns host memory instead)."""

        def __init__(self, device_id: int) -> None:
            if _nccl.library_family() == "host":
                raise NotImplementedError(
                    "NcclMemoryResource allocates GPU memory with ncclMemAlloc, and the "
                    "host backend has no GPU memory; nccl.core.mem_alloc() returns host "
                    "memory (a HostBuffer) on it")
            self.device = Device(_device_id(device_id))

        def allocate(self, size: int, stream: Any = None) -> Any:
            """``size`` bytes of device memory from ``ncclMemAlloc`` (made on
            this resource's device; ``stream`` is not used: the memory is
            ready when the call returns)."""
            with CudaDeviceContext(self.device):
                ptr = _b.mem_alloc(size)
                try:
                    return Buffer.from_handle(ptr=ptr, size=size, mr=self)
                except BaseException:
                    _b.mem_free(ptr)
                    raise

        def deallocate(self, ptr: Any, size: int, stream: Any = None) -> None:
            """Give the memory back with ``ncclMemFree``.  ``ncclMemFree`` is not
            ordered on a stream, so when *stream* is given it is synchronized
            first: work queued on it that uses the memory completes before the
            memory goes."""
            if stream is not None:
                if not hasattr(stream, "sync"):
                    stream = core.Stream.from_handle(_nccl.resolve_stream(stream))
                stream.sync()
            with CudaDeviceContext(self.device):
                _b.mem_free(int(ptr))

        @property
        def device_id(self) -> int:
            return self.device.device_id

        @property
        def is_device_accessible(self) -> bool:
            return True

        @property
        def is_host_accessible(self) -> bool:
            return False

        def __repr__(self) -> str:
            return f"<NcclMemoryResource device_id={self.device_id}>"

    NcclMemoryResource.__module__ = __name__
    NcclMemoryResource.__qualname__ = "NcclMemoryResource"
    return NcclMemoryResource


def get_memory_resource(device_id: int):
    """This thread's :class:`NcclMemoryResource` for *device_id* (one per
    device and thread, made on first use)."""
    cls = _resource_class()
    cache = getattr(_per_thread, "resources", None)
    if cache is None:
        cache = _per_thread.resources = {}
    key = (cls, _device_id(device_id))
    mr = cache.get(key)
    if mr is None:
        mr = cache[key] = cls(key[1])
    return mr


def __getattr__(name: str):
    if name == "NcclMemoryResource":
        return _resource_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "NcclMemoryResource"})


def mem_alloc(size: int, device: Any = None):
    """Allocate ``size`` bytes with ``ncclMemAlloc`` (see the module doc)."""
    if _nccl.library_family() == "host":
        return HostBuffer(_b.mem_alloc(size), size)
    return get_memory_resource(get_device_id(device)).allocate(size)


def mem_free(buf: Any) -> None:
    """Free memory from :func:`mem_alloc` (same as ``buf.close()``).

    On the host backend the memory is returned to the library once no view
    exported from it (DLPack, ``memoryview()``) is left; until then the views
    stay valid."""
    buf.close()
