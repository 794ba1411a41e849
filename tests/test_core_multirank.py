"""nccl.core on the host backend with 2 and 4 ranks (the nccl.testing plugin).

Results are checked against NumPy / ml_dtypes (tests/refdata.py); each test
collects every mismatch (the ``check`` fixture) and fails with all of them.
"""
from __future__ import annotations

import importlib.util
import pickle

import numpy as np
import pytest

import nccl.core as nc
from refdata import COUNTS, NP, OPS, D, inputs, reduce_ref
from conftest import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")


def op_for(comm, name: str, dt):
    """An op argument: NcclRedOp, or a CustomRedOp for PreMulSum (scalar 2).
    PreMulSum alternates between a host scalar and a 1-element buffer."""
    if name != "premulsum":
        return {"sum": nc.SUM, "prod": nc.PROD, "max": nc.MAX, "min": nc.MIN, "avg": nc.AVG}[name]
    if int(dt) % 2:
        return comm.create_pre_mul_sum(np.array([2], NP[dt]))
    return comm.create_pre_mul_sum(np.array([2], NP[dt]).reshape(1), datatype=nc.NcclDataType(int(dt)))


def done(op) -> None:
    if isinstance(op, nc.CustomRedOp):
        op.close()


def every_dtype_and_count(n: int, salt: int = 0):
    """(data type, count, every rank's input) of each case."""
    for dt in NP:
        for count in COUNTS:
            yield dt, count, [inputs(r, dt, count, salt=salt) for r in range(n)]


@pytest.mark.nccl(nranks=[2, 4])
def test_reductions_every_dtype_and_op(comm, check):
    rank, n = comm.rank, comm.nranks
    for dt, count, ins in every_dtype_and_count(n):
        big = [inputs(r, dt, count * n) for r in range(n)]
        for opname in OPS:
            exp = reduce_ref(ins, dt, opname)
            op = op_for(comm, opname, dt)
            tag = f"{dt.name} {opname} n={count}"
            check.received(f"allreduce {tag}", dt, count, exp,
                           lambda recv: comm.allreduce(ins[rank], recv, op))
            buf = ins[rank].copy()
            comm.allreduce(buf, buf, op)
            check.check(f"allreduce in-place {tag}", buf, exp, dt)
            check.received(f"reduce root=None {tag}", dt, count, exp,  # an all-reduce
                           lambda recv: comm.reduce(ins[rank], recv, op))
            for root in sorted({0, n - 1}):
                recv = np.zeros(count, NP[dt])
                comm.reduce(ins[rank], recv if rank == root else None, op, root=root)
                if rank == root:
                    check.check(f"reduce root={root} {tag}", recv, exp, dt)
            rs = reduce_ref(big, dt, opname)[rank * count:(rank + 1) * count]
            check.received(f"reduce_scatter {tag}", dt, count, rs,
                           lambda recv: comm.reduce_scatter(big[rank], recv, op))
            done(op)
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_data_movement_every_dtype(comm, check):
    rank, n = comm.rank, comm.nranks
    for dt, count, ins in every_dtype_and_count(n, salt=1):
        tag = f"{dt.name} n={count}"
        check.received(f"allgather {tag}", dt, n * count, np.concatenate(ins),
                       lambda recv: comm.allgather(ins[rank], recv))
        # a 2-D receive buffer: count is numel
        check.received(f"gather root=None {tag}", dt, (n, count), np.concatenate(ins),
                       lambda recv: comm.gather(ins[rank], recv))
        blocks = [inputs(r, dt, n * count, salt=2) for r in range(n)]
        exp = np.concatenate([blocks[r][rank * count:(rank + 1) * count] for r in range(n)])
        check.received(f"alltoall {tag}", dt, n * count, exp,
                       lambda recv: comm.alltoall(blocks[rank], recv))
        for root in sorted({0, n - 1}):
            check.received(f"broadcast root={root} {tag}", dt, count, ins[root],
                           lambda recv: comm.broadcast(ins[rank] if rank == root else None,
                                                       recv, root))
            buf = ins[rank].copy()
            comm.broadcast(buf, buf, root)
            check.check(f"broadcast in-place root={root} {tag}", buf, ins[root], dt)
            recv = np.zeros(n * count, NP[dt])
            comm.gather(ins[rank], recv if rank == root else None, root)
            if rank == root:
                check.check(f"gather root={root} {tag}", recv, np.concatenate(ins), dt)
            src = [inputs(r, dt, n * count, salt=3) for r in range(n)]
            check.received(f"scatter root={root} {tag}", dt, count,
                           src[root][rank * count:(rank + 1) * count],
                           lambda recv: comm.scatter(src[rank] if rank == root else None,
                                                     recv, root))
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_p2p_and_groups(comm, check):
    rank, n = comm.rank, comm.nranks
    dt = D.Float32
    data = [inputs(r, dt, 100, salt=4) for r in range(n)]
    right, left = (rank + 1) % n, (rank - 1) % n
    recv = np.zeros(100, np.float32)
    with nc.group():
        comm.send(data[rank], right)
        comm.recv(recv, left)
    check.check("group ring", recv, data[left], dt)
    recv = np.zeros(100, np.float32)
    nc.group_start()
    comm.recv(recv, peer=left)
    comm.send(data[rank], peer=right, stream=None)
    nc.group_end()
    check.check("group_start/group_end ring", recv, data[left], dt)
    nc.group_start()
    sim = nc.group_end(simulate=True)
    check.cases += 1
    if not isinstance(sim, nc.GroupSimInfo) or sim.estimated_time < 0:
        check.failures.append(f"group_end(simulate=True) gave {sim!r}")
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_lifecycle(comm, check):
    rank, n = comm.rank, comm.nranks
    # split with color=None: this rank opts out and gets a null communicator
    sub = comm.split(color=None if rank == 0 else 1, key=rank)
    check.cases += 1
    if rank == 0:
        if sub.is_valid or sub.ptr != 0 or repr(sub) != "<Communicator: null (ptr=0)>":
            check.failures.append(f"split(color=None) gave {sub!r}")
    else:
        if sub.nranks != n - 1 or sub.rank != rank - 1:
            check.failures.append(f"split sizes {sub.nranks} {sub.rank}")
        x = np.ones(4, np.float32)
        sub.allreduce(x, x, nc.SUM)
        check.check("split allreduce", x, np.full(4, n - 1, np.float32), D.Float32)
        sub.destroy()
    # even / odd
    with comm.split(rank % 2, key=rank) as half:
        x = np.array([rank], np.int64)
        half.allreduce(x, x, nc.SUM)
        check.check("split even/odd", x, np.array([sum(r for r in range(n) if r % 2 == rank % 2)]), D.Int64)
    # shrink: the last rank leaves
    if n > 1 and rank != n - 1:
        sh = comm.shrink([n - 1])
        x = np.array([1], np.int32)
        sh.allreduce(x, x, nc.SUM)
        check.check("shrink allreduce", x, np.array([n - 1], np.int32), D.Int32)
        sh.destroy()
    # resources are closed by destroy
    tmp = comm.split(0, rank)
    a = np.zeros(256, np.float32)
    h = tmp.register_buffer(a)
    w = tmp.register_window(a)
    op = tmp.create_pre_mul_sum(3.0)
    check.cases += 1
    if not (h.is_valid and op.is_valid and (w is None or w.is_valid)):
        check.failures.append("resources not valid after creation")
    tmp.destroy()
    check.cases += 1
    if h.is_valid or op.is_valid or (w is not None and w.is_valid) or tmp.is_valid:
        check.failures.append("destroy did not close the resources")
    try:
        op.op
        check.failures.append("a closed CustomRedOp still gives its op")
    except RuntimeError:
        pass
    # context manager: abort on exception
    c2 = comm.split(0, rank)
    try:
        with c2:
            raise KeyError("boom")
    except KeyError:
        pass
    check.cases += 1
    if c2.is_valid:
        check.failures.append("context manager did not abort on exception")
    # memory from mem_alloc is a buffer like any other
    buf = nc.mem_alloc(16)
    buf.memoryview()[:] = bytes([rank + 1] * 16)
    out = np.zeros(16, np.int8)
    comm.allreduce(buf, out, nc.SUM)
    check.check("mem_alloc buffer", out, np.full(16, n * (n + 1) // 2, np.int8), D.Int8)
    nc.mem_free(buf)
    # unique ids pickle (as an mpi4py-style bcast would ship them)
    uid = nc.get_unique_id()
    back = pickle.loads(pickle.dumps(uid))
    check.cases += 1
    if back != uid or bytes(back) != bytes(uid) or len(bytes(uid)) != 128:
        check.failures.append("UniqueId pickling")
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_errors(comm, check):
    rank, n = comm.rank, comm.nranks
    f32 = np.zeros(4 * n, np.float32)
    check.expect_invalid("dtype mismatch", lambda: comm.allreduce(f32, np.zeros(4 * n, np.int32), nc.SUM),
                   "Dtype mismatch: sendbuf has dtype float32, recvbuf has dtype int32")
    check.expect_invalid("recv too small", lambda: comm.allreduce(f32, np.zeros(1, np.float32), nc.SUM),
                   f"Buffer count mismatch: recvbuf must have at least {4 * n} elements, got 1")
    check.expect_invalid("broadcast exact", lambda: comm.broadcast(f32, np.zeros(4 * n + 1, np.float32), rank),
                   f"Buffer count mismatch: recvbuf must have exactly {4 * n} elements, got {4 * n + 1}")
    check.expect_invalid("gather small", lambda: comm.allgather(f32, np.zeros(1, np.float32)),
                   f"recvbuf must have at least {4 * n * n} elements (nranks * sendcount), got 1")
    check.expect_invalid("reduce_scatter send", lambda: comm.reduce_scatter(
        np.zeros(n - 1, np.float32), np.zeros(1, np.float32), nc.SUM),
        f"sendbuf must have at least {n} elements (nranks), got {n - 1}")
    check.expect_invalid("reduce_scatter recv", lambda: comm.reduce_scatter(
        np.zeros(2 * n, np.float32), np.zeros(1, np.float32), nc.SUM),
        "recvbuf must have at least 2 elements (sendcount / nranks), got 1")
    check.expect_invalid("alltoall recv", lambda: comm.alltoall(f32, np.zeros(1, np.float32)),
                   f"recvbuf must have at least {4 * n} elements (nranks * count), got 1")
    check.expect_invalid("scatter exact", lambda: comm.scatter(f32, np.zeros(3, np.float32), rank),
                   "recvbuf must have exactly 4 elements (sendcount / nranks), got 3")
    check.expect_invalid("non-contiguous", lambda: comm.allreduce(f32[::2], f32[::2].copy(), nc.SUM),
                   "sendbuf is not contiguous")
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    check.expect_invalid("read-only recv", lambda: comm.allreduce(np.zeros(4, np.float32), ro, nc.SUM),
                   "recvbuf")
    check.expect_invalid("unsupported dtype", lambda: comm.allreduce(
        np.zeros(4, np.int16), np.zeros(4, np.int16), nc.SUM), "Unsupported data type")
    check.expect_invalid("bad root", lambda: comm.broadcast(f32, f32, n), "root")
    check.expect_invalid("null comm", lambda: nc.Communicator().allreduce(f32, f32, nc.SUM),
                   "Cannot allreduce: Communicator not initialized")
    check.expect_invalid("initialize twice", lambda: comm.initialize(n, rank, nc.get_unique_id()),
                   "Communicator is already initialized")
    check.expect_invalid("bad unique id", lambda: nc.Communicator().initialize(1, 0, 42),
                   "unique_id must be a UniqueId or a sequence of UniqueIds")
    check.expect_invalid("grow new rank on valid comm", lambda: comm.grow(n + 1, nc.get_unique_id(), n),
                   "New ranks must use a null communicator (Communicator())")
    check.expect_invalid("grow existing on null", lambda: nc.Communicator().grow(n + 1),
                   "Existing ranks must use an initialized communicator")
    check.expect_invalid("scalar size", lambda: comm.create_pre_mul_sum(np.zeros(2)),
                   "NumPy array must contain exactly 1 element for scalar, got 2 elements")
    check.expect_invalid("bad op", lambda: nc.NcclRedOp(9), "Invalid reduction operator")
    check.expect_invalid("config range", lambda: nc.NCCLConfig(min_ctas=0), "min_ctas")
    # a failed call leaves the communicator usable
    x = np.ones(4, np.float32)
    comm.allreduce(x, x, nc.SUM)
    check.check("usable after errors", x, np.full(4, n, np.float32), D.Float32)
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_specs(comm, check):
    rank, n = comm.rank, comm.nranks
    """Explicit (buffer, count[, dtype]) specs like mpi4py."""
    raw = np.zeros(16, np.uint8)
    raw[:4] = np.frombuffer(np.array([rank + 1], np.float32).tobytes(), np.uint8)
    out = np.zeros(16, np.uint8)
    comm.allreduce((raw, 1, nc.FLOAT32), (out, 1, nc.FLOAT32), nc.SUM)
    got = np.frombuffer(out[:4].tobytes(), np.float32)
    check.check("spec (buf, count, dtype)", got, np.array([n * (n + 1) / 2], np.float32), D.Float32)
    x = np.arange(8, dtype=np.int32) + rank
    y = np.zeros(8, np.int32)
    comm.allreduce((x, 3), (y, 3), nc.MAX)
    check.check("spec (buf, count)", y[:3], np.arange(3, dtype=np.int32) + n - 1, D.Int32)
    check.check("spec count leaves the rest", y[3:], np.zeros(5, np.int32), D.Int32)
    check.assert_ok()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.nccl(nranks=[2, 4])
def test_torch(comm, check):
    import torch

    rank, n = comm.rank, comm.nranks
    for tdt, dt in ((torch.float32, D.Float32), (torch.bfloat16, D.Bfloat16), (torch.int64, D.Int64)):
        ins = [torch.from_numpy(inputs(r, D.Float32, 33).astype(np.float32)).to(tdt) for r in range(n)]
        out = torch.zeros(33, dtype=tdt)
        comm.allreduce(ins[rank], out, nc.SUM)
        exp = sum(i.to(torch.float64) for i in ins).to(tdt)
        check.check(f"torch {tdt}", out.to(torch.float64).numpy(), exp.to(torch.float64).numpy(), D.Float64)
    check.assert_ok()
