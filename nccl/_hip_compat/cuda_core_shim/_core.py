"""Device, Stream, Buffer and MemoryResource on top of nccl's C runtime
layer (``nccl._runtime``: HIP or the CUDA runtime, dlopen'd).

They follow cuda.core for what nccl4py and typical user code use.  On ROCm
they are what ``cuda.core`` resolves to (see ``nccl._hip_compat``); on CUDA
without cuda.core installed, ``nccl.core`` uses them directly.
"""
from __future__ import annotations

import abc
import threading
import weakref
from typing import Any

from nccl import _nccl
from nccl import _runtime as _rt
from nccl._memspan import MemorySpan

__all__ = ["Device", "Stream", "StreamOptions", "Buffer", "MemoryResource", "get_num_devices",
           "GpuRuntimeError", "SHIM_NOTE"]

GpuRuntimeError = _rt.GpuRuntimeError
SHIM_NOTE = "is not provided by the HIP shim of cuda.core (nccl._hip_compat.cuda_core_shim)"

# DLPack device types
_kDLCPU, _kDLCUDA, _kDLCUDAHost, _kDLROCM, _kDLROCMHost = 1, 2, 3, 10, 11


def _not_provided(owner: str, name: str) -> AttributeError:
    return AttributeError(f"{owner}.{name} {SHIM_NOTE}")


class _Strict:
    """Unknown attributes say that the shim does not provide them."""

    __slots__ = ()

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocol probes stay plain
        raise _not_provided(type(self).__name__, name)


def _is_rocm() -> bool:
    return _rt.platform() == "rocm"


def get_num_devices() -> int:
    """Number of GPUs the runtime sees (0 when it reports no device)."""
    return _rt.device_count()


# ----------------------------------------------------------------- streams

class StreamOptions:
    """``StreamOptions(nonblocking=True, priority=None)`` (priority is ignored)."""

    __slots__ = ("nonblocking", "priority")

    def __init__(self, nonblocking: bool = True, priority: int | None = None):
        self.nonblocking = nonblocking
        self.priority = priority


class Stream(_Strict):
    """A GPU stream.  Get one from ``Device.create_stream()``,
    ``Device.default_stream`` or ``Stream.from_handle(handle)``."""

    __slots__ = ("_handle", "_owner", "_device_id", "_finalizer", "__weakref__")
    _handle: int
    _owner: Any
    _device_id: int | None
    _finalizer: weakref.finalize | None

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Stream objects cannot be instantiated directly. "
                           "Please use Device.create_stream() or Stream.from_handle().")

    @classmethod
    def _new(cls, handle: int, owned: bool, device_id: int | None, owner: Any = None):
        self = object.__new__(cls)
        self._handle = int(handle)
        self._owner = owner
        self._device_id = device_id
        self._finalizer = (weakref.finalize(self, _rt.stream_destroy, self._handle)
                           if owned else None)
        return self

    @classmethod
    def from_handle(cls, handle: int) -> "Stream":
        """Borrow an existing stream handle (never destroyed by this object)."""
        return cls._new(int(handle), False, None)

    @classmethod
    def _init(cls, obj: Any = None, options: StreamOptions | None = None,
              device_id: int | None = None) -> "Stream":
        if obj is not None:
            if not hasattr(obj, "__cuda_stream__"):
                raise TypeError(f"{type(obj).__name__} does not implement __cuda_stream__")
            info = obj.__cuda_stream__()
            if not isinstance(info, tuple) or len(info) != 2:
                raise RuntimeError("__cuda_stream__ must return a (version, handle) tuple, "
                                   f"got {info!r}")
            if info[0] != 0:
                raise RuntimeError(f"unsupported __cuda_stream__ protocol version {info[0]}")
            return cls._new(int(info[1]), False, device_id, owner=obj)
        opts = options or StreamOptions()
        flags = 1 if opts.nonblocking else 0
        return cls._new(_rt.stream_create(flags), True, device_id)

    @property
    def handle(self) -> int:
        return self._handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)

    def __int__(self) -> int:
        return self._handle

    @property
    def device(self) -> "Device":
        return Device(self._device_id) if self._device_id is not None else Device()

    @property
    def is_done(self) -> bool:
        return _rt.stream_query(self._handle)

    def sync(self) -> None:
        _rt.stream_synchronize(self._handle)

    def close(self) -> None:
        """Destroy the stream if this object created it."""
        if self._finalizer is not None:
            self._finalizer()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash((Stream, self._handle))

    def __repr__(self) -> str:
        return f"<Stream handle={self._handle:#x} (HIP shim)>"


_DEFAULT_STREAM = Stream._new(0, False, None)


# ------------------------------------------------------------------ memory

class MemoryResource(abc.ABC):
    """Allocates and frees :class:`Buffer` memory (cuda.core's interface)."""

    @abc.abstractmethod
    def __init__(self, *args, **kwargs): ...

    @abc.abstractmethod
    def allocate(self, size: int, stream: Any = None) -> "Buffer": ...

    @abc.abstractmethod
    def deallocate(self, ptr: int, size: int, stream: Any = None) -> None: ...

    @property
    @abc.abstractmethod
    def is_device_accessible(self) -> bool: ...

    @property
    @abc.abstractmethod
    def is_host_accessible(self) -> bool: ...

    @property
    @abc.abstractmethod
    def device_id(self) -> int: ...


class _CurrentDevice:
    """Make a device current for a block, then restore the previous one."""

    __slots__ = ("_dev", "_prev")

    def __init__(self, dev: int):
        self._dev = dev

    def __enter__(self):
        self._prev = _rt.get_device()
        if self._prev != self._dev:
            _rt.set_device(self._dev)

    def __exit__(self, *exc):
        if self._prev != self._dev:
            _rt.set_device(self._prev)


class _MallocResource(MemoryResource):
    """Device memory from the runtime's malloc/free (hipMalloc/cudaMalloc)."""

    def __init__(self, device_id: int):
        self._dev = int(device_id)

    def allocate(self, size: int, stream: Any = None) -> "Buffer":
        size = int(size)
        if size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        with _CurrentDevice(self._dev):
            ptr = _rt.malloc(size)
        return Buffer.from_handle(ptr, size, self)

    def deallocate(self, ptr: int, size: int, stream: Any = None) -> None:
        if ptr:
            if stream is not None:
                Stream.from_handle(_nccl.resolve_stream(stream)).sync()
            _rt.free(int(ptr))

    is_device_accessible = property(lambda self: True)
    is_host_accessible = property(lambda self: False)
    device_id = property(lambda self: self._dev)


def _release(mr: Any, ptr: int, size: int) -> None:
    mr.deallocate(ptr, size)


class Buffer(_Strict, MemorySpan):
    """``size`` bytes at ``handle``, owned through a :class:`MemoryResource`."""

    __slots__ = ("_ptr", "_size", "_mr", "_finalizer", "__weakref__")
    _ptr: int
    _size: int
    _mr: Any
    _finalizer: weakref.finalize | None

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Buffer objects cannot be instantiated directly. "
                           "Please use MemoryResource APIs.")

    @classmethod
    def from_handle(cls, ptr: int, size: int, mr: MemoryResource | None = None) -> "Buffer":
        self = object.__new__(cls)
        self._ptr = int(ptr)
        self._size = int(size)
        self._mr = mr
        self._finalizer = (weakref.finalize(self, _release, mr, self._ptr, self._size)
                           if mr is not None else None)
        return self

    @classmethod
    def allocate(cls, size: int, stream: Any = None) -> "Buffer":
        return Device().allocate(size, stream)

    @property
    def memory_resource(self) -> MemoryResource | None:
        return self._mr

    @property
    def is_device_accessible(self) -> bool:
        return True if self._mr is None else bool(self._mr.is_device_accessible)

    @property
    def is_host_accessible(self) -> bool:
        return False if self._mr is None else bool(self._mr.is_host_accessible)

    @property
    def device_id(self) -> int:
        if self._mr is not None:
            return self._mr.device_id
        if self._ptr:
            kind, dev = _rt.pointer_attributes(self._ptr)
            if kind in (_rt.MEMORY_DEVICE, _rt.MEMORY_MANAGED):
                return dev
        return Device().device_id

    def close(self, stream: Any = None) -> None:
        """Free the memory through its resource (idempotent)."""
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer.detach()
            self._mr.deallocate(self._ptr, self._size, stream)
        self._ptr = 0
        self._size = 0

    def copy_to(self, dst: "Buffer | None" = None, *, stream: Any) -> "Buffer":
        if dst is None:
            if self._mr is None:
                raise ValueError("a buffer without a memory resource needs dst")
            dst = self._mr.allocate(self._size, stream)
        if dst.size != self._size:
            raise ValueError(f"buffer sizes differ: {self._size} and {dst.size}")
        _rt.memcpy_async(dst.handle, self._ptr, self._size, stream)
        return dst

    def copy_from(self, src: "Buffer", *, stream: Any) -> None:
        if src.size != self._size:
            raise ValueError(f"buffer sizes differ: {src.size} and {self._size}")
        _rt.memcpy_async(self._ptr, src.handle, self._size, stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        dev_ok, host_ok = self.is_device_accessible, self.is_host_accessible
        rocm = _is_rocm()
        if dev_ok and not host_ok:
            return (_kDLROCM if rocm else _kDLCUDA, self.device_id)
        if dev_ok and host_ok:
            return (_kDLROCMHost if rocm else _kDLCUDAHost, 0)
        if host_ok:
            return (_kDLCPU, 0)
        raise BufferError("the buffer is neither device- nor host-accessible")

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("the buffer cannot be exported to another device")
        if copy:
            raise BufferError("the buffer cannot be copied on export")
        if not self._ptr and self._size == 0 and self._mr is not None:
            raise BufferError("the buffer has been closed")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        devtype, devid = self.__dlpack_device__()
        return _nccl.gpu_runtime_dlpack_capsule(self._ptr, self._size, devtype, devid, self,
                                                versioned)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Buffer) and (other._ptr, other._size) == (self._ptr, self._size)

    def __hash__(self) -> int:
        return hash((Buffer, self._ptr, self._size))

    def __repr__(self) -> str:
        return f"<Buffer ptr={self._ptr:#x} size={self._size} (HIP shim)>"


# ----------------------------------------------------------------- devices

_tls = threading.local()


class Device(_Strict):
    """A GPU: ``Device()`` is the calling thread's current device,
    ``Device(i)`` device ``i``.  Instances are unique per thread and id."""

    __slots__ = ("_id", "_mr")
    _id: int
    _mr: Any

    def __new__(cls, device_id: int | None = None):
        if device_id is None:
            device_id = _rt.get_device()
        else:
            if isinstance(device_id, bool) or not isinstance(device_id, int):
                device_id = int(device_id)
            count = _rt.device_count()
            if not 0 <= device_id < count:
                raise ValueError(f"device_id {device_id} is out of range; "
                                 f"the runtime reports {count} device(s)")
        cache = getattr(_tls, "devices", None)
        if cache is None:
            cache = _tls.devices = {}
        dev = cache.get(device_id)
        if dev is None:
            dev = object.__new__(cls)
            dev._id = device_id
            dev._mr = _MallocResource(device_id)
            cache[device_id] = dev
        return dev

    @property
    def device_id(self) -> int:
        return self._id

    @property
    def name(self) -> str:
        return _rt.device_name(self._id)

    @property
    def pci_bus_id(self) -> str:
        return _rt.pci_bus_id(self._id)

    @property
    def default_stream(self) -> Stream:
        return _DEFAULT_STREAM

    @property
    def memory_resource(self) -> MemoryResource:
        return self._mr

    @memory_resource.setter
    def memory_resource(self, mr: MemoryResource) -> None:
        if not isinstance(mr, MemoryResource):
            raise TypeError("memory_resource must be a MemoryResource")
        self._mr = mr

    def set_current(self) -> None:
        _rt.set_device(self._id)

    def create_stream(self, obj: Any = None, options: StreamOptions | None = None) -> Stream:
        with _CurrentDevice(self._id):
            return Stream._init(obj, options, self._id)

    def allocate(self, size: int, stream: Any = None) -> Buffer:
        return self._mr.allocate(size, stream)

    def sync(self) -> None:
        with _CurrentDevice(self._id):
            _rt.device_synchronize()

    def __int__(self) -> int:
        return self._id

    def __index__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._id == self._id

    def __hash__(self) -> int:
        return hash((Device, self._id))

    def __reduce__(self):
        return (Device, (self._id,))

    def __repr__(self) -> str:
        return f"<Device id={self._id} (HIP shim)>"
