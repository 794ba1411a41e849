"""One rank of the nccl.core tests on the host backend (run by
tests/test_core_multirank.py through ``python -m nccl.run``).

    python -m nccl.run -n N --backend host tests/core_worker.py SUITE [SUITE...]

Results are checked against NumPy / ml_dtypes (tests/refdata.py).  Prints
one JSON line: {"rank", "cases", "failures"}.
"""
from __future__ import annotations

import json
import os
import pickle
import sys

import numpy as np

import nccl.core as nc
from refdata import COUNTS, NP, OPS, Checker, D, inputs, reduce_ref

CHECK = Checker()
expect_invalid = CHECK.expect_invalid
check = CHECK.check
COMM = nc.Communicator.from_env()
RANK, N = COMM.rank, COMM.nranks


def op_for(name: str, dt):
    """An op argument: NcclRedOp, or a CustomRedOp for PreMulSum (scalar 2).
    PreMulSum alternates between a host scalar and a 1-element buffer."""
    if name != "premulsum":
        return {"sum": nc.SUM, "prod": nc.PROD, "max": nc.MAX, "min": nc.MIN, "avg": nc.AVG}[name]
    if int(dt) % 2:
        return COMM.create_pre_mul_sum(np.array([2], NP[dt]))
    return COMM.create_pre_mul_sum(np.array([2], NP[dt]).reshape(1), datatype=nc.NcclDataType(int(dt)))


def done(op) -> None:
    if isinstance(op, nc.CustomRedOp):
        op.close()


def suite_reductions():
    for dt in NP:
        for opname in OPS:
            for count in COUNTS:
                ins = [inputs(r, dt, count) for r in range(N)]
                exp = reduce_ref(ins, dt, opname)
                op = op_for(opname, dt)
                tag = f"{dt.name} {opname} n={count}"
                recv = np.zeros(count, NP[dt])
                COMM.allreduce(ins[RANK], recv, op)
                check(f"allreduce {tag}", recv, exp, dt)
                buf = ins[RANK].copy()
                COMM.allreduce(buf, buf, op)
                check(f"allreduce in-place {tag}", buf, exp, dt)
                recv = np.zeros(count, NP[dt])
                COMM.reduce(ins[RANK], recv, op)  # root=None: an all-reduce
                check(f"reduce root=None {tag}", recv, exp, dt)
                for root in sorted({0, N - 1}):
                    recv = np.zeros(count, NP[dt])
                    COMM.reduce(ins[RANK], recv if RANK == root else None, op, root=root)
                    if RANK == root:
                        check(f"reduce root={root} {tag}", recv, exp, dt)
                big = [inputs(r, dt, count * N) for r in range(N)]
                rs = reduce_ref(big, dt, opname)[RANK * count:(RANK + 1) * count]
                recv = np.zeros(count, NP[dt])
                COMM.reduce_scatter(big[RANK], recv, op)
                check(f"reduce_scatter {tag}", recv, rs, dt)
                done(op)


def suite_movement():
    for dt in NP:
        for count in COUNTS:
            ins = [inputs(r, dt, count, salt=1) for r in range(N)]
            tag = f"{dt.name} n={count}"
            recv = np.zeros(N * count, NP[dt])
            COMM.allgather(ins[RANK], recv)
            check(f"allgather {tag}", recv, np.concatenate(ins), dt)
            recv = np.zeros((N, count), NP[dt])  # 2-D receive buffer: count is numel
            COMM.gather(ins[RANK], recv)
            check(f"gather root=None {tag}", recv.reshape(-1), np.concatenate(ins), dt)
            blocks = [inputs(r, dt, N * count, salt=2) for r in range(N)]
            recv = np.zeros(N * count, NP[dt])
            COMM.alltoall(blocks[RANK], recv)
            exp = np.concatenate([blocks[r][RANK * count:(RANK + 1) * count] for r in range(N)])
            check(f"alltoall {tag}", recv, exp, dt)
            for root in sorted({0, N - 1}):
                recv = np.zeros(count, NP[dt])
                COMM.broadcast(ins[RANK] if RANK == root else None, recv, root)
                check(f"broadcast root={root} {tag}", recv, ins[root], dt)
                buf = ins[RANK].copy()
                COMM.broadcast(buf, buf, root)
                check(f"broadcast in-place root={root} {tag}", buf, ins[root], dt)
                recv = np.zeros(N * count, NP[dt])
                COMM.gather(ins[RANK], recv if RANK == root else None, root)
                if RANK == root:
                    check(f"gather root={root} {tag}", recv, np.concatenate(ins), dt)
                src = [inputs(r, dt, N * count, salt=3) for r in range(N)]
                recv = np.zeros(count, NP[dt])
                COMM.scatter(src[RANK] if RANK == root else None, recv, root)
                check(f"scatter root={root} {tag}", recv,
                      src[root][RANK * count:(RANK + 1) * count], dt)


def suite_p2p_and_groups():
    dt = D.Float32
    data = [inputs(r, dt, 100, salt=4) for r in range(N)]
    right, left = (RANK + 1) % N, (RANK - 1) % N
    recv = np.zeros(100, np.float32)
    with nc.group():
        COMM.send(data[RANK], right)
        COMM.recv(recv, left)
    check("group ring", recv, data[left], dt)
    recv = np.zeros(100, np.float32)
    nc.group_start()
    COMM.recv(recv, peer=left)
    COMM.send(data[RANK], peer=right, stream=None)
    nc.group_end()
    check("group_start/group_end ring", recv, data[left], dt)
    nc.group_start()
    sim = nc.group_end(simulate=True)
    CHECK.cases += 1
    if not isinstance(sim, nc.GroupSimInfo) or sim.estimated_time < 0:
        CHECK.failures.append(f"group_end(simulate=True) gave {sim!r}")


def suite_lifecycle():
    # split with color=None: this rank opts out and gets a null communicator
    sub = COMM.split(color=None if RANK == 0 else 1, key=RANK)
    CHECK.cases += 1
    if RANK == 0:
        if sub.is_valid or sub.ptr != 0 or repr(sub) != "<Communicator: null (ptr=0)>":
            CHECK.failures.append(f"split(color=None) gave {sub!r}")
    else:
        if sub.nranks != N - 1 or sub.rank != RANK - 1:
            CHECK.failures.append(f"split sizes {sub.nranks} {sub.rank}")
        x = np.ones(4, np.float32)
        sub.allreduce(x, x, nc.SUM)
        check("split allreduce", x, np.full(4, N - 1, np.float32), D.Float32)
        sub.destroy()
    # even / odd
    with COMM.split(RANK % 2, key=RANK) as half:
        x = np.array([RANK], np.int64)
        half.allreduce(x, x, nc.SUM)
        check("split even/odd", x, np.array([sum(r for r in range(N) if r % 2 == RANK % 2)]), D.Int64)
    # shrink: the last rank leaves
    if N > 1 and RANK != N - 1:
        sh = COMM.shrink([N - 1])
        x = np.array([1], np.int32)
        sh.allreduce(x, x, nc.SUM)
        check("shrink allreduce", x, np.array([N - 1], np.int32), D.Int32)
        sh.destroy()
    # resources are closed by destroy
    tmp = COMM.split(0, RANK)
    a = np.zeros(256, np.float32)
    h = tmp.register_buffer(a)
    w = tmp.register_window(a)
    op = tmp.create_pre_mul_sum(3.0)
    CHECK.cases += 1
    if not (h.is_valid and op.is_valid and (w is None or w.is_valid)):
        CHECK.failures.append("resources not valid after creation")
    tmp.destroy()
    CHECK.cases += 1
    if h.is_valid or op.is_valid or (w is not None and w.is_valid) or tmp.is_valid:
        CHECK.failures.append("destroy did not close the resources")
    try:
        op.op
        CHECK.failures.append("a closed CustomRedOp still gives its op")
    except RuntimeError:
        pass
    # context manager: abort on exception
    c2 = COMM.split(0, RANK)
    try:
        with c2:
            raise KeyError("boom")
    except KeyError:
        pass
    CHECK.cases += 1
    if c2.is_valid:
        CHECK.failures.append("context manager did not abort on exception")
    # memory from mem_alloc is a buffer like any other
    buf = nc.mem_alloc(16)
    buf.memoryview()[:] = bytes([RANK + 1] * 16)
    out = np.zeros(16, np.int8)
    COMM.allreduce(buf, out, nc.SUM)
    check("mem_alloc buffer", out, np.full(16, N * (N + 1) // 2, np.int8), D.Int8)
    nc.mem_free(buf)
    # unique ids pickle (as an mpi4py-style bcast would ship them)
    uid = nc.get_unique_id()
    back = pickle.loads(pickle.dumps(uid))
    CHECK.cases += 1
    if back != uid or bytes(back) != bytes(uid) or len(bytes(uid)) != 128:
        CHECK.failures.append("UniqueId pickling")


def suite_errors():
    n = N
    f32 = np.zeros(4 * n, np.float32)
    expect_invalid("dtype mismatch", lambda: COMM.allreduce(f32, np.zeros(4 * n, np.int32), nc.SUM),
                   "Dtype mismatch: sendbuf has dtype Float32, recvbuf has dtype Int32")
    expect_invalid("recv too small", lambda: COMM.allreduce(f32, np.zeros(1, np.float32), nc.SUM),
                   f"Buffer count mismatch: recvbuf must have at least {4 * n} elements, got 1")
    expect_invalid("broadcast exact", lambda: COMM.broadcast(f32, np.zeros(4 * n + 1, np.float32), RANK),
                   f"Buffer count mismatch: recvbuf must have exactly {4 * n} elements, got {4 * n + 1}")
    expect_invalid("gather small", lambda: COMM.allgather(f32, np.zeros(1, np.float32)),
                   f"recvbuf must have at least {4 * n * n} elements (nranks * sendcount), got 1")
    expect_invalid("reduce_scatter send", lambda: COMM.reduce_scatter(
        np.zeros(n - 1, np.float32), np.zeros(1, np.float32), nc.SUM),
        f"sendbuf must have at least {n} elements (nranks), got {n - 1}")
    expect_invalid("reduce_scatter recv", lambda: COMM.reduce_scatter(
        np.zeros(2 * n, np.float32), np.zeros(1, np.float32), nc.SUM),
        "recvbuf must have at least 2 elements (sendcount / nranks), got 1")
    expect_invalid("alltoall recv", lambda: COMM.alltoall(f32, np.zeros(1, np.float32)),
                   f"recvbuf must have at least {4 * n} elements (nranks * count), got 1")
    expect_invalid("scatter exact", lambda: COMM.scatter(f32, np.zeros(3, np.float32), RANK),
                   "recvbuf must have exactly 4 elements (sendcount / nranks), got 3")
    expect_invalid("non-contiguous", lambda: COMM.allreduce(f32[::2], f32[::2].copy(), nc.SUM),
                   "sendbuf is not contiguous")
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    expect_invalid("read-only recv", lambda: COMM.allreduce(np.zeros(4, np.float32), ro, nc.SUM),
                   "recvbuf")
    expect_invalid("unsupported dtype", lambda: COMM.allreduce(
        np.zeros(4, np.int16), np.zeros(4, np.int16), nc.SUM), "Unsupported data type")
    expect_invalid("bad root", lambda: COMM.broadcast(f32, f32, n), "root")
    expect_invalid("null comm", lambda: nc.Communicator().allreduce(f32, f32, nc.SUM),
                   "Cannot allreduce: Communicator not initialized")
    expect_invalid("initialize twice", lambda: COMM.initialize(n, RANK, nc.get_unique_id()),
                   "Communicator is already initialized")
    expect_invalid("bad unique id", lambda: nc.Communicator().initialize(1, 0, 42),
                   "unique_id must be a UniqueId or a sequence of UniqueIds")
    expect_invalid("grow new rank on valid comm", lambda: COMM.grow(n + 1, nc.get_unique_id(), n),
                   "New ranks must use a null communicator (Communicator())")
    expect_invalid("grow existing on null", lambda: nc.Communicator().grow(n + 1),
                   "Existing ranks must use an initialized communicator")
    expect_invalid("scalar size", lambda: COMM.create_pre_mul_sum(np.zeros(2)),
                   "NumPy array must contain exactly 1 element for scalar, got 2 elements")
    expect_invalid("bad op", lambda: nc.NcclRedOp(9), "Invalid reduction operator")
    expect_invalid("config range", lambda: nc.NCCLConfig(min_ctas=0), "min_ctas")
    # a failed call leaves the communicator usable
    x = np.ones(4, np.float32)
    COMM.allreduce(x, x, nc.SUM)
    check("usable after errors", x, np.full(4, n, np.float32), D.Float32)


def suite_specs():
    """Explicit (buffer, count[, dtype]) specs like mpi4py."""
    raw = np.zeros(16, np.uint8)
    raw[:4] = np.frombuffer(np.array([RANK + 1], np.float32).tobytes(), np.uint8)
    out = np.zeros(16, np.uint8)
    COMM.allreduce((raw, 1, nc.FLOAT32), (out, 1, nc.FLOAT32), nc.SUM)
    got = np.frombuffer(out[:4].tobytes(), np.float32)
    check("spec (buf, count, dtype)", got, np.array([N * (N + 1) / 2], np.float32), D.Float32)
    x = np.arange(8, dtype=np.int32) + RANK
    y = np.zeros(8, np.int32)
    COMM.allreduce((x, 3), (y, 3), nc.MAX)
    check("spec (buf, count)", y[:3], np.arange(3, dtype=np.int32) + N - 1, D.Int32)
    check("spec count leaves the rest", y[3:], np.zeros(5, np.int32), D.Int32)


def suite_torch():
    try:
        import torch
    except ImportError:
        return
    for tdt, dt in ((torch.float32, D.Float32), (torch.bfloat16, D.Bfloat16), (torch.int64, D.Int64)):
        ins = [torch.from_numpy(inputs(r, D.Float32, 33).astype(np.float32)).to(tdt) for r in range(N)]
        out = torch.zeros(33, dtype=tdt)
        COMM.allreduce(ins[RANK], out, nc.SUM)
        exp = sum(i.to(torch.float64) for i in ins).to(tdt)
        check(f"torch {tdt}", out.to(torch.float64).numpy(), exp.to(torch.float64).numpy(), D.Float64)


SUITES = {name[6:]: fn for name, fn in globals().items() if name.startswith("suite_")}

for name in sys.argv[1:]:
    try:
        SUITES[name]()
    except Exception as e:  # noqa: BLE001 - reported, the parent test fails on it
        CHECK.failures.append(f"{name}: {type(e).__name__}: {e}")
COMM.destroy()
os.write(1, (json.dumps({"rank": RANK, "cases": CHECK.cases, "failures": CHECK.failures[:20],
                         "nfailures": len(CHECK.failures)}) + "\n").encode())
