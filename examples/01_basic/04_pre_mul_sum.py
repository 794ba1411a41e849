"""PreMulSum: every rank's data is multiplied by a scalar before the sum,
here 1/nranks, which makes an average.

    python -m nccl.run -n 4 examples/01_basic/04_pre_mul_sum.py
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    n = comm.nranks
    op = comm.create_pre_mul_sum(1.0 / n, nccl.FLOAT64)
    send = xp.full(4096, 2.0 * (comm.rank + 1), "float64")
    recv = xp.zeros(4096, "float64")
    comm.allreduce(send, recv, op)
    got = xp.numpy(recv)
    assert np.allclose(got, n + 1), f"expected {n + 1}, got {got[:4]}"
    op.close()
    return f"mean of 2, 4, ..., {2 * n} = {got[0]:g}"


report("04_pre_mul_sum", body)
