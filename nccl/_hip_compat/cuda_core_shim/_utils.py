"""``StridedMemoryView`` and ``args_viewable_as_strided_memory`` of the shim.

A view is resolved by nccl's C buffer resolution
(``nccl._nccl.resolve_buffer``): DLPack producers (versioned or legacy),
``__cuda_array_interface__`` v3, the buffer protocol.  Only contiguous
memory is viewed, so ``strides`` is always ``None`` (C-contiguous).
"""
from __future__ import annotations

import functools
from typing import Any

from nccl import _dtypes, _nccl
from nccl import _runtime as _rt
from nccl._errors import NcclInvalid

from ._core import SHIM_NOTE

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory"]

# DLPack device types that a view accepts, and whether they are device memory
_DEVICE_TYPES = {1: False, 2: True, 3: False, 10: True, 11: False, 13: True}

class StridedMemoryView:
    """A view of an array-like object: ``ptr``, ``shape``, ``strides``,
    ``dtype``, ``device_id`` (-1 for host memory), ``is_device_accessible``,
    ``readonly``, ``exporting_obj``."""

    __slots__ = ("ptr", "shape", "strides", "_dtype", "_nccl_dtype", "device_id",
                 "is_device_accessible", "readonly", "exporting_obj")

    def __init__(self, obj: Any = None, stream_ptr: int | None = None):
        self.exporting_obj = obj
        if obj is None:
            self.ptr, self.strides, self._nccl_dtype = 0, None, None
            self.shape: tuple[int, ...] = ()
            self._dtype, self.device_id, self.is_device_accessible = None, -1, False
            self.readonly = False
            return
        ptr, count, dtype, dev_type, dev_id, readonly = _nccl.resolve_buffer(obj, "obj", False)
        if dev_type not in _DEVICE_TYPES:
            raise BufferError(f"unsupported DLPack device type {dev_type}")
        on_device = _DEVICE_TYPES[dev_type]
        if on_device and stream_ptr is None:
            raise BufferError("stream=None is ambiguous with view()")
        if on_device and dev_type != 13:
            dev_id = self._device_of(ptr, dev_id)
        self.ptr = ptr
        shape = getattr(obj, "shape", None)
        try:
            self.shape = tuple(int(s) for s in shape) if shape is not None else (count,)
        except TypeError:
            self.shape = (count,)
        self.strides = None
        self._nccl_dtype = dtype
        self._dtype = None
        self.device_id = dev_id if on_device else -1
        self.is_device_accessible = on_device
        self.readonly = bool(readonly)

    @staticmethod
    def _device_of(ptr: int, fallback: int) -> int:
        try:
            kind, dev = _rt.pointer_attributes(ptr)
        except _rt.GpuRuntimeError:
            return fallback
        return dev if kind in (_rt.MEMORY_DEVICE, _rt.MEMORY_MANAGED) else fallback

    @property
    def dtype(self):
        """The element type as a NumPy dtype (bfloat16/float8 need ml_dtypes)."""
        if self._dtype is None and self._nccl_dtype is not None:
            try:
                self._dtype = _dtypes.numpy_dtype(self._nccl_dtype)
            except NcclInvalid:
                name = _dtypes.NAMES[self._nccl_dtype]
                raise NotImplementedError(f"{name} views need ml_dtypes") from None
        return self._dtype

    def __getattr__(self, name: str):
        raise AttributeError(f"StridedMemoryView.{name} {SHIM_NOTE}")

    def __repr__(self) -> str:
        return (f"StridedMemoryView(ptr={self.ptr:#x}, shape={self.shape}, "
                f"strides={self.strides}, dtype={self.dtype}, device_id={self.device_id}, "
                f"is_device_accessible={self.is_device_accessible}, readonly={self.readonly})")


class _StridedMemoryViewProxy:
    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def view(self, stream_ptr: int | None = None) -> StridedMemoryView:
        return StridedMemoryView(self.obj, stream_ptr)


def args_viewable_as_strided_memory(arg_indices: tuple[int, ...]):
    """Decorator: the positional arguments at ``arg_indices`` arrive as
    proxies whose ``.view(stream_ptr)`` gives a :class:`StridedMemoryView`."""

    def wrap(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            args = list(args)
            for i in arg_indices:
                args[i] = _StridedMemoryViewProxy(args[i])
            return func(*args, **kwargs)

        return wrapped

    return wrap
