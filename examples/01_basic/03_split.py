"""Split the ranks into even and odd groups and all-reduce inside each.

    python -m nccl.run -n 4 examples/01_basic/03_split.py
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    color = comm.rank % 2
    with comm.split(color=color, key=comm.rank) as sub:
        members = list(range(color, comm.nranks, 2))
        assert sub.nranks == len(members) and sub.rank == members.index(comm.rank)
        x = xp.full(256, comm.rank, "int32")
        sub.allreduce(x, x, nccl.SUM)  # in place
        got = xp.numpy(x)
        assert np.all(got == sum(members)), f"expected {sum(members)}, got {got[:4]}"
        return f"group {color} ({sub.rank}/{sub.nranks}) sum = {got[0]}"


report("03_split", body)
