"""Sum one array across all ranks.

    python -m nccl.run -n 4 examples/01_basic/01_allreduce.py      # any machine
    mpirun -np 8 python examples/01_basic/01_allreduce.py          # GPUs
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    n = comm.nranks
    send = xp.full(1 << 16, comm.rank + 1)
    recv = xp.zeros(1 << 16)
    comm.allreduce(send, recv, nccl.SUM)
    got = xp.numpy(recv)
    assert np.all(got == n * (n + 1) / 2), f"expected {n * (n + 1) / 2}, got {got[:4]}"
    return f"allreduce sum = {got[0]:g}"


report("01_allreduce", body)
