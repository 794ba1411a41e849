"""Enumerations of ``nccl.core`` for the device API, GIN and CFT (nccl4py 0.6
names), and the decoding of values whose meaning depends on the vendor.

``ncclGinType_t`` numbers transports differently on NCCL and RCCL (4 is GPI
on NCCL 2.30.7+ and ROCSHMEM on RCCL; 5 is EFA_GDA on NCCL 2.31+ and ANVIL on
RCCL).  ``decode_gin_type`` turns a value the library reported into the
member that names it for the loaded library; a value that library does not
define becomes ``UNKNOWN_<n>`` rather than a wrong name or an exception.
"""
from __future__ import annotations

from enum import IntEnum, IntFlag

from nccl._enums import (CftCap, CftTeamMode, GinConnectionType, GinType, HostCftMode,
                         NvlsHostMode, RcclGinType, _Decodes)

__all__ = [
    "NcclGinType", "NcclGinConnectionType", "NcclHostCftMode", "NcclNvlsHostMode",
    "NcclCftTeamMode", "NcclCftCap", "decode_gin_type",
]

# Classes of their own, named as nccl4py 0.6 names them (their reprs and
# __name__ are 0.6's); every value is the bindings' (nccl._enums).


class NcclGinConnectionType(IntEnum):
    NONE = GinConnectionType.NONE
    FULL = GinConnectionType.FULL
    RAIL = GinConnectionType.RAIL
    CUSTOM_STRIDE = GinConnectionType.CUSTOM_STRIDE


class NcclCftTeamMode(IntEnum):
    FLAT = CftTeamMode.FLAT
    HIER_MULTIMEM = CftTeamMode.HIER_MULTIMEM
    HIER_LSA = CftTeamMode.HIER_LSA


class NcclCftCap(IntFlag):
    NONE = 0
    CFT = CftCap.CFT
    MULTIMEM = CftCap.MULTIMEM


class NcclGinType(_Decodes, IntEnum):
    """GIN transport types, NCCL's names; ``ROCSHMEM`` and ``ANVIL`` are the
    RCCL names of 4 and 5, kept as aliases (see ``decode_gin_type``)."""
    NONE = GinType.NONE
    PROXY = GinType.PROXY
    GDAKI = GinType.GDAKI
    GPI = GinType.GPI
    EFA_GDA = GinType.EFA_GDA
    ROCSHMEM = GinType.ROCSHMEM
    ANVIL = GinType.ANVIL


class NcclHostCftMode(IntEnum):
    DEFAULT = HostCftMode.Default
    ENABLE = HostCftMode.Enable
    DISABLE = HostCftMode.Disable
    FALLBACK = HostCftMode.Fallback


class NcclNvlsHostMode(IntFlag):
    ENABLE = NvlsHostMode.Enable
    DISABLE_TRANSPORT = NvlsHostMode.DisableTransport
    DISABLE_SYMMETRIC_MULTIMEM = NvlsHostMode.DisableSymmetricMultimem
    DISABLE = NvlsHostMode.Disable


# The first NCCL version (as get_version() codes it) that defines each value.
_NCCL_GIN_SINCE = {4: 23007, 5: 23100}


def decode_gin_type(value: int, family: str | None = None,
                    version: int | None = None) -> IntEnum:
    """The GIN type ``value`` as the loaded library (or ``family``/``version``)
    defines it: an ``RcclGinType`` on RCCL, an ``NcclGinType`` otherwise."""
    if family is None or version is None:
        from nccl import _nccl

        family = _nccl.library_family() if family is None else family
        version = _nccl.get_version() if version is None else version
    if family == "rccl":
        return RcclGinType(value)
    if version < _NCCL_GIN_SINCE.get(value, 0):
        return NcclGinType._missing_(value)
    return NcclGinType(value)
