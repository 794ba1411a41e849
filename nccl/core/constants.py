"""Flags and sentinels of the NCCL API (both spellings of nccl4py 0.2 and 0.3:
the second are aliases of the first)."""
from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = ["CTAPolicy", "CommShrinkFlag", "CommSuspendFlag", "WindowFlag", "NCCL_UNDEF_INT",
           "NCCL_UNDEF_FLOAT", "NCCL_SPLIT_NOCOLOR"]

NCCL_UNDEF_INT = -2147483648
NCCL_UNDEF_FLOAT = -1.0
NCCL_SPLIT_NOCOLOR = -1
NCCL_MAGIC = 0xCAFEBEEF


class CTAPolicy(IntFlag):
    DEFAULT = 0x00
    EFFICIENCY = 0x01
    ZERO = 0x02
    Default = DEFAULT
    Efficiency = EFFICIENCY
    Zero = ZERO


class CommShrinkFlag(IntEnum):
    DEFAULT = 0x00
    ABORT = 0x01
    Default = DEFAULT
    Abort = ABORT


class CommSuspendFlag(IntFlag):
    MEM = 0x01
    Mem = MEM


class WindowFlag(IntFlag):
    DEFAULT = 0x00
    COLL_SYMMETRIC = 0x01
    STRICT_ORDERING = 0x02
    GIN_ONLY = 0x04       # NCCL 2.32
    CFT_COUNTED = 0x08    # NCCL 2.32
    Default = DEFAULT
    CollSymmetric = COLL_SYMMETRIC
    StrictOrdering = STRICT_ORDERING
