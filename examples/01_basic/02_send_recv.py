"""Point-to-point: rank 2k sends an array to rank 2k+1 (a lone last rank idles).

    python -m nccl.run -n 4 examples/01_basic/02_send_recv.py
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    rank, n = comm.rank, comm.nranks
    if rank % 2 == 0 and rank + 1 < n:
        comm.send(xp.asarray(np.arange(1024, dtype=np.float32) + rank), rank + 1)
        return f"sent 1024 floats to rank {rank + 1}"
    if rank % 2 == 1:
        buf = xp.zeros(1024)
        comm.recv(buf, rank - 1)
        got = xp.numpy(buf)
        assert np.array_equal(got, np.arange(1024, dtype=np.float32) + rank - 1), got[:4]
        return f"received 1024 floats from rank {rank - 1}"
    return "no partner (odd number of ranks)"


report("02_send_recv", body)
