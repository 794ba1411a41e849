"""CuPy helpers (imported lazily as ``nccl.core.cupy``)."""
from __future__ import annotations

from typing import Any

from nccl._errors import NcclInvalid

from ..typing import NcclDataType

__all__ = ["empty", "resolve_array"]


def _cupy():
    try:
        import cupy
    except ImportError:
        raise ModuleNotFoundError("CuPy is not installed") from None
    return cupy


def resolve_array(array: Any) -> tuple[int, int, NcclDataType, int]:
    """``(data.ptr, size, NcclDataType, device id)`` of a CuPy array."""
    cupy = _cupy()
    if not isinstance(array, cupy.ndarray):
        raise NcclInvalid(f"expected a cupy.ndarray, got {type(array).__name__}")
    dt = NcclDataType.UINT8 if array.dtype == bool else NcclDataType.from_numpy_dtype(array.dtype)
    return array.data.ptr, array.size, dt, array.device.id


def empty(shape: Any, dtype: Any = float, order: str = "C"):
    """A CuPy array in memory from ``ncclMemAlloc`` on the current device."""
    cupy = _cupy()
    from ..memory import mem_alloc

    dt = cupy.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for s in shape:
        n *= int(s)
    buf = mem_alloc(max(n * dt.itemsize, 1), cupy.cuda.Device().id)
    return cupy.from_dlpack(buf).view(dt)[:n].reshape(shape, order=order)
