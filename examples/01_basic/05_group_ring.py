"""Grouped calls: a ring exchange (every rank sends right and receives from
the left in one group, which never deadlocks), then two all-reduces
aggregated into one group.

    python -m nccl.run -n 4 examples/01_basic/05_group_ring.py
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    rank, n = comm.rank, comm.nranks
    right, left = (rank + 1) % n, (rank - 1) % n
    send = xp.asarray(np.arange(512, dtype=np.int64) + 1000 * rank)
    recv = xp.zeros(512, "int64")
    with nccl.group():
        comm.send(send, right)
        comm.recv(recv, left)
    assert np.array_equal(xp.numpy(recv), np.arange(512) + 1000 * left)

    a, b = xp.full(64, 1.0), xp.full(64, float(rank))
    with nccl.group():
        comm.allreduce(a, a, nccl.SUM)
        comm.allreduce(b, b, nccl.MAX)
    assert np.all(xp.numpy(a) == n) and np.all(xp.numpy(b) == n - 1)
    return f"got rank {left}'s data around the ring; grouped sum {n}, max {n - 1}"


report("05_group_ring", body)
