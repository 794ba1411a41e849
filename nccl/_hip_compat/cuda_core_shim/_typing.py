"""Typing names of the shim (``cuda.core.typing``)."""
from __future__ import annotations

from typing import Protocol, Union, runtime_checkable

__all__ = ["IsStreamType", "IsStreamT", "DevicePointerType", "DevicePointerT"]


@runtime_checkable
class IsStreamType(Protocol):
    """Anything with ``__cuda_stream__() -> (0, handle)``."""

    def __cuda_stream__(self) -> tuple[int, int]: ...


IsStreamT = IsStreamType
DevicePointerType = Union[int, None]
DevicePointerT = DevicePointerType
