"""Devices, streams and events as nccl4py 0.6's ``nccl.core.cuda`` names them.

The resolvers turn what a caller passes (a device id, a stream or event
object, an int handle) into what NCCL takes.  ``get_stream_ptr`` and
``get_event_ptr`` need no GPU and no cuda.core: they read ints, objects with
``__cuda_stream__``, ``.handle`` (cuda.core, hip-python), ``.cuda_stream`` or
``.ptr`` (torch, CuPy).  The others make cuda.core objects: from cuda.core
when it is installed, else from nccl's stand-in for it on its C runtime layer
(ROCm; CUDA without cuda.core), which provides ``Device`` and ``Stream`` but
no ``Event``.  ``Device``, ``Event`` and ``Stream`` are those classes,
resolved on first use (``import nccl.core.cuda`` imports no cuda.core); a
class the stand-in lacks raises ImportError naming cuda-core.
"""
from __future__ import annotations

import operator
from typing import Any

from nccl import _nccl

from .host_device import CPUDevice
from .typing import NcclDeviceSpec, NcclEventSpec, NcclStreamSpec

__all__ = ["CudaDeviceContext", "get_cuda_device", "get_device_id", "get_cuda_stream",
           "get_stream_ptr", "get_event_ptr", "NcclDeviceSpec", "NcclEventSpec",
           "NcclStreamSpec"]

# cuda.core's classes, re-exported on first use
_CORE_CLASSES = ("Device", "Event", "Stream")


def _core() -> Any:
    from nccl._hip_compat import core_module

    return core_module()


def _core_class(name: str) -> Any:
    core = _core()
    cls = getattr(core, name, None)
    if cls is None:
        raise ImportError(
            f"nccl.core.cuda.{name} is cuda.core's {name}: cuda.core is not installed "
            "(pip install cuda-core), and nccl's stand-in for it on the GPU runtime "
            f"({core.__name__}) provides Device and Stream, not {name}")
    return cls


def __getattr__(name: str) -> Any:
    if name in _CORE_CLASSES:
        return _core_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CORE_CLASSES})


def _not_bool(what: str, value: Any) -> None:
    if isinstance(value, bool):
        raise TypeError(f"{what} must not be a bool")


def get_cuda_device(device: NcclDeviceSpec | None = None) -> Any:
    """The ``Device`` of ``device``: a Device (returned as it is; so is a
    host-backend communicator's CPUDevice), a device id (or an object with
    ``.device_id``), or None for the calling thread's current device."""
    _not_bool("device", device)
    if isinstance(device, CPUDevice):
        return device
    Device = _core_class("Device")
    if device is None:
        return Device()
    if isinstance(device, Device):
        return device
    if not hasattr(device, "__index__") and hasattr(device, "device_id"):
        device = device.device_id  # a Device of another cuda.core (the stand-in's, say)
    return Device(operator.index(device))


def get_device_id(device: NcclDeviceSpec | None = None) -> int:
    """The device id of ``device`` (an int is returned as it is; None: the
    current device)."""
    _not_bool("device", device)
    if isinstance(device, int):
        return device
    return int(get_cuda_device(device).device_id)


class CudaDeviceContext:
    """``with CudaDeviceContext(device):`` makes ``device`` (a Device or an id)
    current for the block and then restores the device that was current when
    the context was made; nothing is switched when they are the same."""

    def __init__(self, device: NcclDeviceSpec) -> None:
        self._device = get_cuda_device(device)
        # a CPUDevice (host backend) is never switched: there is no current GPU
        self._old_device = (self._device if isinstance(self._device, CPUDevice)
                            else get_cuda_device(None))

    def __enter__(self) -> "CudaDeviceContext":
        if self._device.device_id != self._old_device.device_id:
            self._device.set_current()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._device.device_id != self._old_device.device_id:
            self._old_device.set_current()


def get_cuda_stream(stream: NcclStreamSpec | None = None,
                    device: NcclDeviceSpec | None = None) -> Any:
    """The ``Stream`` of ``stream``: a Stream (as it is), an int handle, an
    object with ``__cuda_stream__`` (wrapped on ``device``), or None for the
    default stream of ``device`` (None: the current device)."""
    _not_bool("stream", stream)
    Stream = _core_class("Stream")
    if stream is None:
        return get_cuda_device(device).default_stream
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int):
        return Stream.from_handle(handle=stream)
    return get_cuda_device(device).create_stream(stream)


def get_stream_ptr(stream: NcclStreamSpec | None = None) -> int:
    """The ``cudaStream_t`` / ``hipStream_t`` of ``stream`` as an int: None
    gives 0 (the default stream), an int is returned as it is, an object is
    read as nccl.core's calls read it (``__cuda_stream__``, ``.handle``,
    ``.cuda_stream``, ``.ptr``; TypeError naming them otherwise)."""
    _not_bool("stream", stream)
    if isinstance(stream, int):
        return stream
    return int(_nccl.resolve_stream(stream))


def get_event_ptr(event: NcclEventSpec | None = None) -> int:
    """The ``cudaEvent_t`` / ``hipEvent_t`` of ``event`` as an int; 0 for None.

    An event object (cuda.core's, or any with an int ``.handle``) gives its
    handle (RuntimeError once it is closed: handle 0); an int must be a
    nonzero handle (ValueError for 0)."""
    if event is None:
        return 0
    if isinstance(event, bool) or not isinstance(event, int):
        handle = getattr(event, "handle", None)
        if handle is None or isinstance(event, (bool, float)):
            raise TypeError("event must be a cuda.core.Event or a nonzero integer cudaEvent_t "
                            "handle")
        if int(handle) == 0:
            raise RuntimeError("Event has been closed")
        return int(handle)
    if event == 0:
        raise ValueError("CUDA event has a null handle; initialize it before passing it to NCCL")
    return event
