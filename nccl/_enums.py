"""Enumerations of the NCCL / RCCL C API (values are the C ABI's)."""
from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = [
    "Result", "RedOp", "RedOp_dummy", "RedOpDummy", "DataType", "ScalarResidence",
    "CommMemStat", "GinType", "RcclGinType", "GinConnectionType", "GinSignalOp", "HostCftMode",
    "NvlsHostMode", "CftTeamMode", "CftCap", "EncryptionMode",
]


class _Decodes:
    """A value the enum does not name decodes to an int-valued pseudo member
    ``UNKNOWN_<value>`` instead of raising: the library (or a newer one than
    this table knows) may report it."""

    @classmethod
    def _missing_(cls, value):
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        member = int.__new__(cls, value)  # type: ignore[call-overload]
        member._name_ = f"UNKNOWN_{value}"
        member._value_ = value
        return member


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


class RedOpDummy(IntEnum):
    NumOps_dummy = 5


RedOp_dummy = RedOpDummy  # the name before nccl4py 0.5


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


class GinType(_Decodes, IntEnum):
    """``ncclGinType_t`` with NCCL's names (GPI from 2.30.7, EFA_GDA from 2.31).
    The same numbers mean other transports on RCCL (see ``RcclGinType``); the
    RCCL names are kept here as aliases for code written against them.  A
    value the library reports is decoded by ``nccl.core`` for the loaded
    library's family and version."""
    NONE = 0
    PROXY = 2
    GDAKI = 3
    GPI = 4
    EFA_GDA = 5
    GIN_MAX_TYPES = 6
    ROCSHMEM = 4
    ANVIL = 5


class RcclGinType(_Decodes, IntEnum):
    """``ncclGinType_t`` as RCCL numbers it (RCCL 2.30)."""
    NONE = 0
    PROXY = 2
    GDAKI = 3
    ROCSHMEM = 4
    ANVIL = 5


class GinConnectionType(_Decodes, IntEnum):
    """``ncclGinConnectionType_t``; CUSTOM_STRIDE from NCCL 2.31."""
    NONE = 0
    FULL = 1
    RAIL = 2
    CUSTOM_STRIDE = 3


class GinSignalOp(IntEnum):
    """``ncclGinSignalOp_t``."""
    Inc = 0
    Add = 1


class HostCftMode(IntEnum):
    """``ncclHostCftMode_t`` (NCCL 2.31)."""
    Default = -2147483648
    Enable = 1
    Disable = 2
    Fallback = 3


class NvlsHostMode(IntEnum):
    """``ncclNvlsHostMode_t`` (NCCL 2.32)."""
    Default = -2147483648
    Enable = 0
    DisableTransport = 1
    DisableSymmetricMultimem = 2
    Disable = 0x7FFFFFFF


class CftTeamMode(IntEnum):
    """``ncclCftTeamMode_t`` (NCCL 2.31)."""
    FLAT = 0
    HIER_MULTIMEM = 1
    HIER_LSA = 2


class CftCap(IntFlag):
    """``ncclCftCap_t`` (NCCL 2.31)."""
    NONE = 0
    CFT = 1
    MULTIMEM = 2


class EncryptionMode(IntEnum):
    """``ncclEncryptionMode_t`` (NCCL 2.32)."""
    NONE = 0
    PSK = 1
