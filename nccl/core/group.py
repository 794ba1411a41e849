"""Groups of NCCL calls: ``with group(): ...`` or group_start()/group_end().

Inside a group the library only queues the calls and runs them at the
outermost group end.  Every ``nccl.core`` call made while a group is open
(also one opened with ``nccl.bindings.group_start``) keeps its buffers, their
exports and the objects whose handles the library fills alive until that
outermost ``group_end`` / ``group_simulate_end`` returns, on every path,
errors included; temporaries such as ``comm.send(x * 10, peer)`` are safe.
Calls of ``nccl.bindings`` with integer addresses keep nothing alive: there
the caller keeps the memory valid until the group ends.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from nccl import bindings as _b

__all__ = ["group", "group_start", "group_end", "group_simulate_end", "GroupSimInfo"]


class GroupSimInfo:
    """The estimate of a simulated group end (``ncclGroupSimulateEnd``)."""

    def __init__(self, estimated_time: float | None = None):
        self._lowpp = _b.SimInfo()
        if estimated_time is not None:
            self._lowpp.estimated_time = estimated_time

    @property
    def estimated_time(self) -> float:
        return self._lowpp.estimated_time

    @property
    def ptr(self) -> int:
        return self._lowpp.ptr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GroupSimInfo) and self.estimated_time == other.estimated_time

    def __repr__(self) -> str:
        return f"GroupSimInfo(estimated_time={self.estimated_time!r})"


def group_start() -> None:
    _b.group_start()


def group_end(*, simulate: bool = False) -> GroupSimInfo | None:
    """End the group; with ``simulate=True`` only estimate it and return the estimate."""
    if simulate:
        info = GroupSimInfo()
        _b.group_simulate_end(info.ptr)
        return info
    _b.group_end()
    return None


def group_simulate_end(sim_info: GroupSimInfo | None = None) -> GroupSimInfo:
    """nccl4py 0.2 form: fill ``sim_info`` (or a new one) and return it."""
    info = sim_info if sim_info is not None else GroupSimInfo()
    _b.group_simulate_end(info.ptr)
    return info


@contextlib.contextmanager
def group() -> Iterator[None]:
    """Run the calls in the block as one NCCL group (ended even on error).
    What the calls in it use stays alive until the group ends (module doc)."""
    group_start()
    try:
        yield
    finally:
        group_end()
