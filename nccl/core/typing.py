"""Types of the high-level API: data types, reduction ops, spec aliases.

``NcclDataType`` and ``NcclRedOp`` are ``IntEnum``s (nccl4py 0.3); they also
accept what nccl4py 0.2's classes accepted (NumPy dtypes and dtype names,
type objects) and have its ``.itemsize`` / ``.numpy_dtype`` members.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Protocol, Union, runtime_checkable

from nccl._errors import NcclInvalid, NcclTimeoutError

__all__ = [
    "NcclInvalid", "NcclTimeoutError", "NcclDataType", "NcclRedOp", "NcclGinType",
    "NcclGinConnectionType",
    "NcclCommMemStat", "SupportsDLPack", "SupportsCAI", "NcclSupportedBuffer", "NcclBufferSpec",
    "NcclScalarSpec", "NcclDeviceSpec", "NcclStreamSpec",
    "INT8", "CHAR", "UINT8", "INT32", "INT", "UINT32", "INT64", "UINT64", "FLOAT16", "HALF",
    "FLOAT32", "FLOAT", "FLOAT64", "DOUBLE", "BFLOAT16", "FLOAT8E4M3", "FLOAT8E5M2",
    "SUM", "PROD", "MAX", "MIN", "AVG",
]

_ITEMSIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
_NUMPY_NAMES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
                6: "float16", 7: "float32", 8: "float64", 9: "bfloat16", 10: "float8_e4m3fn",
                11: "float8_e5m2"}


class NcclDataType(IntEnum):
    """``ncclDataType_t``.  ``NcclDataType(x)`` also takes NumPy dtypes, dtype
    names (``"float32"``) and type objects (``np.float32``, ``float``)."""

    INT8 = 0
    CHAR = 0
    UINT8 = 1
    INT32 = 2
    INT = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    HALF = 6
    FLOAT32 = 7
    FLOAT = 7
    FLOAT64 = 8
    DOUBLE = 8
    BFLOAT16 = 9
    FLOAT8E4M3 = 10
    FLOAT8E5M2 = 11

    @classmethod
    def _missing_(cls, value: Any):
        if isinstance(value, int) and not isinstance(value, bool):
            raise NcclInvalid(f"Unsupported data type: NCCL datatype value {value} is invalid")
        return cls.from_numpy_dtype(value)

    @classmethod
    def from_numpy_dtype(cls, dtype: Any) -> "NcclDataType":
        """By name (bfloat16, float8_*), else by NumPy kind and size; bool is UINT8."""
        from nccl._dtypes import SUPPORTED, nccl_dtype

        try:
            return cls(nccl_dtype(dtype))
        except NcclInvalid:
            pass
        try:
            import numpy as np

            dt = np.dtype(dtype)
        except Exception:
            raise NcclInvalid(f"Unsupported data type: {dtype!r}; supported: {SUPPORTED}") from None
        raise NcclInvalid(f"Unsupported data type: numpy dtype {dt} (kind={dt.kind}, "
                          f"itemsize={dt.itemsize}, name={dt.name}) has no NCCL equivalent; "
                          f"supported: {SUPPORTED}")

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[int(self)]

    @property
    def numpy_dtype(self):
        import numpy as np

        name = _NUMPY_NAMES[int(self)]
        if int(self) >= 9:
            try:
                import ml_dtypes
            except ImportError:
                raise NcclInvalid(f"{name} needs the ml-dtypes package (pip install ml-dtypes)") from None
            return np.dtype(getattr(ml_dtypes, name))
        return np.dtype(name)


class NcclRedOp(IntEnum):
    """``ncclRedOp_t`` built-ins; custom ops (PreMulSum) are ``CustomRedOp``."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4

    @classmethod
    def _missing_(cls, value: Any):
        raise NcclInvalid(f"Invalid reduction operator: value {value!r} is not a valid NCCL "
                          f"reduction operator")


from .enums import NcclGinConnectionType, NcclGinType  # noqa: E402  (re-exported)


class NcclCommMemStat(IntEnum):
    GPU_MEM_SUSPEND = 0
    GPU_MEM_SUSPENDED = 1
    GPU_MEM_PERSIST = 2
    GPU_MEM_TOTAL = 3
    GpuMemSuspend = 0
    GpuMemSuspended = 1
    GpuMemPersist = 2
    GpuMemTotal = 3


@runtime_checkable
class SupportsDLPack(Protocol):
    def __dlpack__(self, /, *, stream: Any = None) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


@runtime_checkable
class SupportsCAI(Protocol):
    @property
    def __cuda_array_interface__(self) -> dict: ...


NcclSupportedBuffer = Union[SupportsDLPack, SupportsCAI, Any]
NcclBufferSpec = NcclSupportedBuffer
NcclScalarSpec = Union[int, float, Any]
NcclDeviceSpec = Union[Any, int]
NcclStreamSpec = Union[Any, int]

INT8 = CHAR = NcclDataType.INT8
UINT8 = NcclDataType.UINT8
INT32 = INT = NcclDataType.INT32
UINT32 = NcclDataType.UINT32
INT64 = NcclDataType.INT64
UINT64 = NcclDataType.UINT64
FLOAT16 = HALF = NcclDataType.FLOAT16
FLOAT32 = FLOAT = NcclDataType.FLOAT32
FLOAT64 = DOUBLE = NcclDataType.FLOAT64
BFLOAT16 = NcclDataType.BFLOAT16
FLOAT8E4M3 = NcclDataType.FLOAT8E4M3
FLOAT8E5M2 = NcclDataType.FLOAT8E5M2
SUM, PROD, MAX, MIN, AVG = NcclRedOp.SUM, NcclRedOp.PROD, NcclRedOp.MAX, NcclRedOp.MIN, NcclRedOp.AVG
