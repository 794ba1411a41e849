"""The device of a host-backend communicator, as code written for cuda.core's
``Device`` uses it.

On GPUs ``Communicator.device`` is a cuda.core ``Device``; on the host
backend it is a :class:`CPUDevice`: its ``device_id`` is the communicator's
``ncclCommCuDevice`` (the index given to ``init_all``; 0 for ``init``).
Every call of the host backend completes before it returns, so what orders
GPU work is exact here as a no-op: ``set_current()``, ``sync()``, and
streams (:class:`HostStream`, handle 0) that are always complete.  Members
that describe a GPU (``compute_capability``, ``uuid``, ``properties``, ...)
raise AttributeError saying so.

``host_device_count()`` is what ``Communicator.init_all()`` (no argument)
counts on the host backend: ``NCCL4PY_HOST_DEVICES``, default 2.
"""
from __future__ import annotations

import operator
import os
import re
from typing import Any, NoReturn

__all__ = ["CPUDevice", "HostStream", "host_device_count", "HOST_DEVICES_ENV",
           "DEFAULT_HOST_DEVICES", "MAX_HOST_DEVICES"]

HOST_DEVICES_ENV = "NCCL4PY_HOST_DEVICES"
DEFAULT_HOST_DEVICES = 2
MAX_HOST_DEVICES = 1024  # the host backend's most ranks per communicator

# cuda.core Device members that describe a GPU, with what to use instead
_GPU_ONLY = {
    "compute_capability": "there is no GPU architecture",
    "arch": "there is no GPU architecture",
    "uuid": "there is no GPU to identify",
    "pci_bus_id": "there is no GPU on a PCI bus",
    "properties": "there are no GPU attributes",
    "resources": "there are no GPU resources",
    "context": "there is no CUDA context",
    "create_context": "there is no CUDA context",
    "memory_resource": "host memory comes from allocate() or nccl.core.mem_alloc()",
    "create_event": "every call completes before it returns: there is nothing to wait for",
    "create_graph_builder": "there are no CUDA graphs",
    "can_access_peer": "there is no peer GPU",
    "to_system_device": "there is no GPU for NVML",
    "get_all_devices": "Communicator.init_all() makes the host backend's devices",
    "create_opaque_array": "there are no GPU arrays",
    "create_mipmapped_array": "there are no GPU arrays",
    "create_texture_object": "there are no GPU textures",
    "create_surface_object": "there are no GPU surfaces",
}


def host_device_count() -> int:
    """The number of communicators ``Communicator.init_all()`` makes on the
    host backend: ``NCCL4PY_HOST_DEVICES`` (a decimal integer from 1 to
    1024), default 2; ValueError naming the variable otherwise."""
    text = os.environ.get(HOST_DEVICES_ENV, "")
    if text == "":
        return DEFAULT_HOST_DEVICES
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= MAX_HOST_DEVICES:
        raise ValueError(f"{HOST_DEVICES_ENV}={text[:100]!r} is invalid: expected a decimal "
                         f"integer from 1 to {MAX_HOST_DEVICES} (the devices "
                         "Communicator.init_all() counts on the host backend)")
    return int(text)


class HostStream:
    """A stream of the host backend: handle 0 (what nccl.core passes for the
    default stream), always complete, since every call has completed when it
    returns.  Accepted wherever a stream is (``__cuda_stream__``, ``.handle``)."""

    __slots__ = ("_device",)

    def __init__(self, device: "CPUDevice") -> None:
        self._device = device

    handle = 0

    @property
    def device(self) -> "CPUDevice":
        return self._device

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0)

    def sync(self) -> None:
        """Nothing to wait for: the work of every call is done when it returns."""

    def close(self) -> None:
        """Nothing to release."""

    def __int__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"<HostStream handle=0x0 on {self._device!r}>"


class CPUDevice:
    """The device of a communicator on the host backend: host memory.

    ``CPUDevice(device_id=0)``; ``device_id``, ``name``, ``set_current()``,
    ``sync()``, ``default_stream`` / ``create_stream()`` (:class:`HostStream`),
    ``allocate(size)`` (host memory from ``ncclMemAlloc``), ``int()``,
    equality and hashing by id, pickling."""

    __slots__ = ("_id",)

    def __init__(self, device_id: int = 0) -> None:
        if isinstance(device_id, bool):
            raise TypeError("device_id must be an int, not bool")
        self._id = operator.index(device_id)

    @property
    def device_id(self) -> int:
        return self._id

    @property
    def name(self) -> str:
        return "CPU (nccl4py host backend)"

    @property
    def default_stream(self) -> HostStream:
        return HostStream(self)

    def set_current(self, ctx: Any = None) -> None:
        """Nothing to switch: host memory is the same for every device.
        ``ctx`` (a cuda.core Context) cannot exist here: it must be None."""
        if ctx is not None:
            raise TypeError("the host backend has no CUDA contexts: set_current() takes no ctx")

    def sync(self) -> None:
        """Nothing to wait for: every call completes before it returns."""

    def create_stream(self, obj: Any = None, options: Any = None) -> HostStream:
        """A new :class:`HostStream` (``options``, cuda.core's StreamOptions,
        change nothing: the stream is always complete).  Wrapping another
        library's stream (``obj``) is refused: the host backend has none."""
        if obj is not None:
            raise TypeError(f"the host backend has no GPU streams: cannot wrap {obj!r}; use "
                            "create_stream() or default_stream")
        return HostStream(self)

    def allocate(self, size: int, stream: Any = None) -> Any:
        """``size`` bytes of host memory from ``ncclMemAlloc`` (a
        :class:`~nccl.core.memory.HostBuffer`); ``stream`` is not needed."""
        from .memory import mem_alloc

        return mem_alloc(size)

    def __getattr__(self, name: str) -> NoReturn:
        why = _GPU_ONLY.get(name)
        if why is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(f"CPUDevice.{name} is not available on the host backend: {why}")

    def __int__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUDevice) and other._id == self._id

    def __hash__(self) -> int:
        return hash((CPUDevice, self._id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (CPUDevice, (self._id,))

    def __repr__(self) -> str:
        return f"<CPUDevice {self._id} (host backend)>"
