"""Misuse that used to give silently wrong results or crashes.

- non-integer ops, roots, peers, counts, colors and keys.
"""
from __future__ import annotations

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from nccl._errors import NcclInvalid
from stub_comm import COMM, calls, stub  # noqa: F401

# ------------------------------------------------------- integers only

class Index:
    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


BAD_NUMBERS = [1.9, 1.0, np.float32(1.0), np.float64(0.0), "1"]


@pytest.mark.parametrize("bad", BAD_NUMBERS, ids=repr)
def test_non_integer_arguments_are_type_errors(stub, bad):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    comm.nranks  # the size and rank are asked for once: no library call below
    before = calls(stub)
    cases = [
        lambda: comm.allreduce(x, x, bad),
        lambda: comm.reduce_scatter(x, x, bad),
        lambda: comm.reduce(x, x, nc.SUM, root=bad),
        lambda: comm.broadcast(x, x, root=bad),
        lambda: comm.gather(x, x, root=bad),
        lambda: comm.scatter(x, x, root=bad),
        lambda: comm.send(x, bad),
        lambda: comm.recv(x, bad),
        lambda: comm.allreduce((x, bad, nc.FLOAT32), x, nc.SUM),  # count
    ]
    if not isinstance(bad, str):  # a str in a spec names a dtype
        cases.append(lambda: comm.send((x, bad), 0))
        cases.append(lambda: comm.allreduce((x, 2, bad), x, nc.SUM))  # a number as dtype
    for call in cases:
        with pytest.raises(TypeError):
            call()
    assert calls(stub) == before


def test_none_is_not_an_op_or_peer(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    with pytest.raises(TypeError):
        comm.allreduce(x, x, None)
    with pytest.raises(TypeError):
        comm.send(x, None)


@pytest.mark.parametrize("bad", [1.5, 2.0, np.float32(1.0), "0"], ids=repr)
def test_python_level_integers(stub, bad):
    comm = nc.Communicator(COMM)
    comm.nranks
    before = calls(stub)
    for call in (
        lambda: comm.split(bad),
        lambda: comm.split(0, bad),
        lambda: comm.shrink([bad]),
        lambda: comm.grow(bad),
        lambda: comm.revoke(bad),
        lambda: comm.suspend(bad),
        lambda: comm.get_mem_stat(bad),
        lambda: comm.signal(bad),
        lambda: comm.put_signal(np.ones(4, np.float32), 0, nc.RegisteredWindowHandle(COMM, 0x10, 16),
                                peer_window_offset=bad),
        lambda: nc.Communicator.init_all([bad]),
        lambda: nc.NCCLDevCommRequirements(barrier_count=bad),
    ):
        with pytest.raises(TypeError):
            call()
    # the window above registered one window; nothing else reached the library
    assert calls(stub) == before + 1


def test_integer_like_values_accepted(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    comm.allreduce(x, x, Index(int(nc.SUM)))
    comm.allreduce(x, x, np.int64(0))
    comm.send(x, np.int32(1))
    comm.send((x, Index(4)), Index(1))
    op = comm.create_pre_mul_sum(2.0)  # a CustomRedOp is an op through __index__
    comm.allreduce(x, x, op)


def test_bindings_take_integers_only(stub):
    for bad in (1.9, np.float32(1.0), "1"):
        with pytest.raises(TypeError):
            b.all_reduce(0x10, 0x20, 4, 7, bad, COMM, 0)
        with pytest.raises(TypeError):
            b.send(0x10, 4, 7, bad, COMM, 0)
        with pytest.raises(TypeError):
            b.comm_split(COMM, bad, 0, 0)
