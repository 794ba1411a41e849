"""The exception of what ``nccl4py_host`` cannot do exactly."""
from __future__ import annotations

from nccl._errors import NcclInvalid

__all__ = ["UnsupportedError"]


class UnsupportedError(NcclInvalid, NotImplementedError):
    """A torch.distributed feature this backend cannot do exactly: an
    operation NCCL lacks (bitwise reductions, receive from any source, tags,
    monitored_barrier), a data type a reduction cannot carry, a tensor that
    is not in CPU memory.  The message names the alternative.  It is an
    ``NcclInvalid`` and a ``NotImplementedError``."""
