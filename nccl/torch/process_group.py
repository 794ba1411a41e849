"""``HostProcessGroup``: torch.distributed's process group on nccl.core.

torch 2.13 lets Python implement a whole ``ProcessGroup`` (not a
``Backend`` of one): torch's Python API calls these methods directly, and
its C++ code (DDP's reducer, functional collectives, DTensor) reaches them
through the ``ProcessGroup`` trampoline.  The collectives are in
``reductions`` and ``movement``; each resolves its tensors (``staging``),
runs the nccl.core calls, here or on the group's lane (``lane``: large
``async_op`` all-reduces, all-gathers and reduce-scatters) and returns a
``Work``.  Sends and receives are queued (``p2p``); every collective first
runs that queue.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

import nccl.core as nc
from nccl._errors import NCCLError, NcclInvalid

from . import p2p
from .errors import UnsupportedError
from .calls import alike
from .movement import DataMovement
from .reductions import Reductions
from .registration import BACKEND
from .rendezvous import communicator
from .staging import IN, OUT, stage
from .work import completed

__all__ = ["HostProcessGroup", "BACKEND"]

_NC_SUM = int(nc.SUM)


class HostProcessGroup(Reductions, DataMovement, dist.ProcessGroup):
    """A torch.distributed process group over a nccl.core communicator of the
    host backend (see docs/torch.md).  ``communicator`` is that communicator
    (usable directly with nccl.core on the same ranks, between this group's
    calls)."""

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._comm, self._uid = communicator(store, rank, size, timeout)
        self._timeout = timeout
        self._group_name = ""
        self._group_desc = ""
        self._premul: dict = {}
        self._barrier_buf = torch.zeros(1, dtype=torch.uint8)
        self._failed = False
        self._lane = None  # started by the first large async_op collective

    # ------------------------------------------------------------ identity

    @property
    def communicator(self) -> nc.Communicator:
        return self._comm

    def getBackendName(self) -> str:
        return BACKEND

    def name(self) -> str:
        return BACKEND

    def getGroupName(self) -> str:
        return self._group_name

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupDesc(self) -> str:
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    # torch >= 2.14 asks a group's backend for a device, also of a Python
    # group (batch_isend_irecv: supports_coalescing): this group is its own
    # backend for CPU tensors, and supports neither coalescing nor splitting.
    supports_coalescing = False
    supports_splitting = False

    def _get_backend(self, device):
        if torch.device(device).type == "cpu":
            return self
        return super()._get_backend(device)

    def __repr__(self) -> str:
        return (f"<HostProcessGroup {self._group_name!r}: rank {self._rank} of {self._size}, "
                f"{self._comm!r}>")

    # ------------------------------------------------- point-to-point

    def _p2p(self, kind: int, tensors, peer: int, tag: int, what: str):
        if tag != 0:
            raise UnsupportedError(
                f"{what} with tag={tag}: NCCL has no message tags; messages between two "
                "ranks arrive in the order they were sent: drop tag= and issue them in the "
                "same order on both ranks (or use a separate group per stream of messages)")
        if not 0 <= peer < self._size:
            raise NcclInvalid(f"{what}: peer {peer} is not a rank of this group of "
                              f"{self._size}")
        use = IN if kind == p2p.SEND else OUT
        staged = [stage(t, f"{what} tensor", use) for t in tensors]
        return p2p.submit(self, kind, staged, peer)

    def send(self, tensors, dstRank: int, tag: int = 0):
        return self._p2p(p2p.SEND, tensors, dstRank, tag, "send")

    def recv(self, tensors, srcRank: int, tag: int = 0):
        return self._p2p(p2p.RECV, tensors, srcRank, tag, "recv")

    def recv_anysource(self, tensors, tag: int = 0):
        raise UnsupportedError(
            "recv from any source: NCCL receives from a named rank; pass src= "
            "(dist.recv(t, src=r)); to learn who sends, exchange the ranks first "
            "(e.g. dist.all_gather_object), or use a gloo group")

    # ------------------------------------------------------ the rest

    @alike
    def barrier(self, opts=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        b = self._barrier_buf
        return self._launch([lambda: self._comm.allreduce(b, b, _NC_SUM)], (), [], opts)

    def monitored_barrier(self, *args, **kwargs):
        raise UnsupportedError(
            "monitored_barrier is gloo's: use dist.barrier() (a rank that does not arrive "
            "within the group's timeout makes it fail with NcclTimeoutError naming the call) "
            "or a gloo group (dist.new_group(backend='gloo'))")

    def _start_coalescing(self, device=None) -> None:
        pass  # collectives run as they are called; sends and receives are queued

    def _end_coalescing(self, device=None):
        if p2p.queue or p2p.running:
            p2p.flush()
        self._drain()
        return completed([])

    def _close_lane(self) -> None:
        lane, self._lane = self._lane, None
        if lane is not None:
            lane.close()

    def shutdown(self) -> None:
        """Release the communicator (and its /dev/shm segment) once the
        lane's calls have run; queued sends and receives of this group fail."""
        p2p.discard(self, "the group was shut down")
        self._close_lane()
        comm = self._comm
        if comm is None or not comm.is_valid:
            return
        if self._failed:
            comm.abort()
        else:
            try:
                comm.destroy()
            except (NCCLError, NcclInvalid):
                comm.abort()
        self._premul.clear()  # closed with the communicator

    def abort(self) -> None:
        """Abort the communicator (a call blocked on the lane fails), then
        release everything."""
        p2p.discard(self, "the group was aborted")
        if self._comm is not None and self._comm.is_valid:
            self._comm.abort()
        self._close_lane()
        self._premul.clear()


