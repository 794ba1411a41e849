"""nccl4py 0.6's ``nccl.core.buffer``: ``mem_alloc`` and ``mem_free``.

They are :mod:`nccl.core.memory`'s: memory from ``ncclMemAlloc``, a cuda.core
``Buffer`` of device memory on a GPU library (``device``: a Device, an id, or
None for the current device) and a ``HostBuffer`` on the host backend.
"""
from __future__ import annotations

from .memory import mem_alloc, mem_free

__all__ = ["mem_alloc", "mem_free"]
