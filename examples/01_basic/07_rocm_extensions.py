"""RCCL's extra collectives: all-reduce with a bias added to the result, and
all-to-all with per-rank counts and displacements.  They exist in RCCL and
in nccl4py's host backend; with a library without them this says so and
still succeeds.

    python -m nccl.run -n 4 examples/01_basic/07_rocm_extensions.py
"""
from __future__ import annotations

import numpy as np

import nccl.core as nccl
from _common import Arrays, report


def body(comm: nccl.Communicator, xp: Arrays) -> str:
    rank, n = comm.rank, comm.nranks
    x, y = xp.full(128, rank + 1), xp.zeros(128)
    bias = xp.asarray(np.arange(128, dtype=np.float32))
    try:
        comm.allreduce_with_bias(x, y, nccl.SUM, bias)
    except NotImplementedError as e:  # FunctionNotFoundError
        return f"allreduce_with_bias and alltoallv are unavailable in this library ({e})"
    assert np.array_equal(xp.numpy(y), np.arange(128) + n * (n + 1) / 2)

    # alltoallv: rank r sends j + 1 elements (value 100 r + j) to rank j.
    sendcounts = [j + 1 for j in range(n)]
    sdispls = [sum(sendcounts[:j]) for j in range(n)]
    send = xp.asarray(np.concatenate([np.full(j + 1, 100 * rank + j, np.int32)
                                      for j in range(n)]))
    recvcounts = [rank + 1] * n
    rdispls = [j * (rank + 1) for j in range(n)]
    recv = xp.zeros(n * (rank + 1), "int32")
    comm.alltoallv(send, sendcounts, sdispls, recv, recvcounts, rdispls)
    want = np.concatenate([np.full(rank + 1, 100 * j + rank, np.int32) for j in range(n)])
    assert np.array_equal(xp.numpy(recv), want), xp.numpy(recv)
    return "allreduce_with_bias and alltoallv agree with NumPy"


report("07_rocm_extensions", body)
