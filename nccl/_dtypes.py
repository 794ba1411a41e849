"""Array dtypes -> ``ncclDataType_t`` values.

Used by the C core for the dtype of an explicit ``(buffer, count, dtype)``
spec when it is not already an int: a NumPy dtype or anything
``numpy.dtype()`` accepts (including ml_dtypes' bfloat16 and float8 types),
a torch dtype, or a name such as ``"float32"``.  bool maps to uint8.
"""
from __future__ import annotations

from ._enums import DataType
from ._errors import NcclInvalid

__all__ = ["SUPPORTED", "nccl_dtype"]

SUPPORTED = ("int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, "
             "bfloat16, float8_e4m3fn, float8_e5m2 (bool as uint8)")

_BY_NAME = {
    "int8": DataType.Int8,
    "uint8": DataType.Uint8,
    "bool": DataType.Uint8,
    "int32": DataType.Int32,
    "uint32": DataType.Uint32,
    "int64": DataType.Int64,
    "uint64": DataType.Uint64,
    "float16": DataType.Float16,
    "float32": DataType.Float32,
    "float64": DataType.Float64,
    "bfloat16": DataType.Bfloat16,
    "float8_e4m3fn": DataType.Float8e4m3,
    "float8_e5m2": DataType.Float8e5m2,
}


def _unsupported(obj) -> NcclInvalid:
    return NcclInvalid(f"Unsupported data type: {obj!r}. NCCL supports: {SUPPORTED}")


def _numpy_name(obj) -> str | None:
    try:
        import numpy as np
    except ImportError:
        return None
    try:
        dt = np.dtype(obj)
    except Exception:
        return None
    if dt.byteorder == ">" if np.little_endian else dt.byteorder == "<":
        return None  # non-native byte order
    return dt.name


def nccl_dtype(obj) -> int:
    """The ``ncclDataType_t`` value for ``obj``; NcclInvalid if NCCL has none."""
    if isinstance(obj, bool):
        raise _unsupported(obj)
    if isinstance(obj, int):
        if 0 <= obj < DataType.NumTypes:
            return int(obj)
        raise _unsupported(obj)
    if isinstance(obj, str) and obj in _BY_NAME:
        return int(_BY_NAME[obj])
    if type(obj).__module__ == "torch":  # torch.dtype: str() is "torch.<name>"
        name = str(obj)
        if name.startswith("torch.") and name[6:] in _BY_NAME:
            return int(_BY_NAME[name[6:]])
        raise _unsupported(obj)
    name = _numpy_name(obj)
    if name in _BY_NAME:
        return int(_BY_NAME[name])
    raise _unsupported(obj)
