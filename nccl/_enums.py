"""Enumerations of the NCCL / RCCL C API (values are the C ABI's)."""
from __future__ import annotations

from enum import IntEnum

__all__ = [
    "Result", "RedOp", "RedOp_dummy", "DataType", "ScalarResidence", "CommMemStat",
    "GinType", "GinConnectionType",
]


class Result(IntEnum):
    """``ncclResult_t``; ``Timeout`` exists from NCCL 2.30.3 and RCCL 2.30.4."""
    Success = 0
    UnhandledCudaError = 1
    SystemError = 2
    InternalError = 3
    InvalidArgument = 4
    InvalidUsage = 5
    RemoteError = 6
    InProgress = 7
    Timeout = 8
    NumResults = 9


class RedOp_dummy(IntEnum):
    NumOps_dummy = 5


class RedOp(IntEnum):
    """``ncclRedOp_t``; values from ``NumOps`` on are custom (PreMulSum) ops."""
    Sum = 0
    Prod = 1
    Max = 2
    Min = 3
    Avg = 4
    NumOps = 5
    MaxRedOp = 0x7FFFFFFF


class DataType(IntEnum):
    """``ncclDataType_t`` with the C header's aliases."""
    Int8 = 0
    Char = 0
    Uint8 = 1
    Int32 = 2
    Int = 2
    Uint32 = 3
    Int64 = 4
    Uint64 = 5
    Float16 = 6
    Half = 6
    Float32 = 7
    Float = 7
    Float64 = 8
    Double = 8
    Bfloat16 = 9
    Float8e4m3 = 10
    Float8e5m2 = 11
    NumTypes = 12


class ScalarResidence(IntEnum):
    Device = 0
    HostImmediate = 1


class CommMemStat(IntEnum):
    GpuMemSuspend = 0
    GpuMemSuspended = 1
    GpuMemPersist = 2
    GpuMemTotal = 3


class GinType(IntEnum):
    """``ncclGinType_t``.  Value 4 is GPI on NCCL and ROCSHMEM on RCCL; 5 is
    RCCL's ANVIL.  Both vendors' values decode without error."""
    NONE = 0
    PROXY = 2
    GDAKI = 3
    GPI = 4
    ROCSHMEM = 4
    ANVIL = 5


class GinConnectionType(IntEnum):
    NONE = 0
    FULL = 1
    RAIL = 2
