"""The host-backend collective suites through nccl.bindings, for one rank:
run by tests/test_host_collectives.py (after ``bind``), or as a program
that prints one JSON line {"rank", "cases", "failures"} (test_host_mpi.py):

    mpiexec -n N python tests/host_worker.py SUITE [SUITE...]

Every rank builds every rank's input from a seed, so each rank computes the
expected results itself with NumPy / ml_dtypes, independently of the library.
"""
from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np

import nccl.bindings as b
import nccl.run
from refdata import BIG, COUNTS, NP, OPS, Checker, D, inputs, reduce_ref

COMM, RANK, N = 0, 0, 1
CHECK = Checker()
failures = CHECK.failures
check = CHECK.check


def bind(comm: int, rank: int, nranks: int, checker: Checker) -> None:
    """Run the suites below on communicator handle *comm*, recording in *checker*."""
    global COMM, RANK, N, CHECK, failures, check
    COMM, RANK, N, CHECK = comm, rank, nranks, checker
    failures, check = checker.failures, checker.check


def ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def make_op(op: str, dt, residence: int = 1):
    """(op value, destroy callback)"""
    base = {"sum": b.RedOp.Sum, "prod": b.RedOp.Prod, "max": b.RedOp.Max, "min": b.RedOp.Min,
            "avg": b.RedOp.Avg}
    if op != "premulsum":
        return int(base[op]), lambda: None
    scalar = np.array([2], dtype=NP[dt])
    handle = b.red_op_create_pre_mul_sum(ptr(scalar), int(dt), residence, COMM)
    keep = [scalar]  # a "device" scalar is read at each use: keep it alive
    return handle, lambda: (b.red_op_destroy(handle, COMM), keep.clear())


# ------------------------------------------------------------ reductions

def reductions(counts, dtypes, ops, per_rank=1):
    """(dt, op, count, every rank's input of count * per_rank elements, their
    reduction, the op's handle) for every case; the op lives for the step."""
    for dt, op, count in itertools.product(dtypes, ops, counts):
        ins = [inputs(r, dt, count * per_rank) for r in range(N)]
        exp = reduce_ref(ins, dt, op)
        h, done = make_op(op, dt)
        yield dt, op, count, ins, exp, h
        done()


def suite_allreduce(counts=COUNTS, dtypes=tuple(NP), ops=OPS):
    for dt, op, count, ins, exp, h in reductions(counts, dtypes, ops):
        send = ins[RANK].copy()
        recv = np.zeros(count, NP[dt])
        b.all_reduce(ptr(send), ptr(recv), count, int(dt), h, COMM, 0)
        check(f"allreduce {dt.name} {op} n={count}", recv, exp, dt)
        check(f"allreduce {dt.name} {op} n={count} send untouched", send, ins[RANK], dt)
        buf = ins[RANK].copy()
        b.all_reduce(ptr(buf), ptr(buf), count, int(dt), h, COMM, 0)
        check(f"allreduce in-place {dt.name} {op} n={count}", buf, exp, dt)


def suite_reduce(counts=COUNTS, dtypes=tuple(NP), ops=OPS):
    for root in sorted({0, N - 1}):
        for dt, op, count, ins, exp, h in reductions(counts, dtypes, ops):
            recv = np.full(count, 1, NP[dt])
            b.reduce(ptr(ins[RANK]), ptr(recv), count, int(dt), h, root, COMM, 0)
            if RANK == root:
                check(f"reduce root={root} {dt.name} {op} n={count}", recv, exp, dt)
            else:  # non-root receive buffers are not written
                check(f"reduce non-root untouched {dt.name}", recv, np.full(count, 1, NP[dt]), dt)
            buf = ins[RANK].copy()
            b.reduce(ptr(buf), ptr(buf), count, int(dt), h, root, COMM, 0)
            if RANK == root:
                check(f"reduce in-place root={root} {dt.name} {op} n={count}", buf, exp, dt)


def suite_reduce_scatter(counts=COUNTS, dtypes=tuple(NP), ops=OPS):
    for dt, op, count, ins, full, h in reductions(counts, dtypes, ops, per_rank=N):
        exp = full[RANK * count:(RANK + 1) * count]
        recv = np.zeros(count, NP[dt])
        b.reduce_scatter(ptr(ins[RANK]), ptr(recv), count, int(dt), h, COMM, 0)
        check(f"reduce_scatter {dt.name} {op} n={count}", recv, exp, dt)
        buf = ins[RANK].copy()
        b.reduce_scatter(ptr(buf), buf.ctypes.data + RANK * count * buf.itemsize, count,
                         int(dt), h, COMM, 0)
        check(f"reduce_scatter in-place {dt.name} {op} n={count}",
              buf[RANK * count:(RANK + 1) * count], exp, dt)


# --------------------------------------------------------- data movement

def suite_movement(counts=COUNTS, dtypes=tuple(NP)):
    for dt in dtypes:
        for count in counts:
            ins = [inputs(r, dt, count, salt=1) for r in range(N)]
            item = np.dtype(NP[dt]).itemsize
            # allgather
            recv = np.zeros(N * count, NP[dt])
            b.all_gather(ptr(ins[RANK]), ptr(recv), count, int(dt), COMM, 0)
            exp = np.concatenate(ins)
            check(f"allgather {dt.name} n={count}", recv, exp, dt)
            buf = np.zeros(N * count, NP[dt])
            buf[RANK * count:(RANK + 1) * count] = ins[RANK]
            b.all_gather(ptr(buf) + RANK * count * item, ptr(buf), count, int(dt), COMM, 0)
            check(f"allgather in-place {dt.name} n={count}", buf, exp, dt)
            # alltoall: block j of rank r goes to rank j, lands at block r
            blocks = [inputs(r, dt, N * count, salt=2) for r in range(N)]
            recv = np.zeros(N * count, NP[dt])
            b.allto_all(ptr(blocks[RANK]), ptr(recv), count, int(dt), COMM, 0)
            exp = np.concatenate([blocks[r][RANK * count:(RANK + 1) * count] for r in range(N)])
            check(f"alltoall {dt.name} n={count}", recv, exp, dt)
            for root in sorted({0, N - 1}):
                # broadcast / bcast
                recv = np.zeros(count, NP[dt])
                b.broadcast(ptr(ins[RANK]), ptr(recv), count, int(dt), root, COMM, 0)
                check(f"broadcast root={root} {dt.name} n={count}", recv, ins[root], dt)
                buf = ins[RANK].copy()
                b.broadcast(ptr(buf), ptr(buf), count, int(dt), root, COMM, 0)
                check(f"broadcast in-place root={root} {dt.name}", buf, ins[root], dt)
                buf = ins[RANK].copy()
                b.bcast(ptr(buf), count, int(dt), root, COMM, 0)
                check(f"bcast root={root} {dt.name} n={count}", buf, ins[root], dt)
                # gather
                recv = np.zeros(N * count, NP[dt])
                b.gather(ptr(ins[RANK]), ptr(recv), count, int(dt), root, COMM, 0)
                if RANK == root:
                    check(f"gather root={root} {dt.name} n={count}", recv, np.concatenate(ins), dt)
                buf = np.zeros(N * count, NP[dt])
                buf[RANK * count:(RANK + 1) * count] = ins[RANK]
                b.gather(ptr(buf) + RANK * count * item, ptr(buf), count, int(dt), root, COMM, 0)
                if RANK == root:
                    check(f"gather in-place root={root} {dt.name}", buf, np.concatenate(ins), dt)
                # scatter
                src = [inputs(r, dt, N * count, salt=3) for r in range(N)]
                recv = np.zeros(count, NP[dt])
                b.scatter(ptr(src[RANK]), ptr(recv), count, int(dt), root, COMM, 0)
                check(f"scatter root={root} {dt.name} n={count}", recv,
                      src[root][RANK * count:(RANK + 1) * count], dt)
                buf = src[RANK].copy()
                b.scatter(ptr(buf), ptr(buf) + RANK * count * item, count, int(dt), root, COMM, 0)
                check(f"scatter in-place root={root} {dt.name}",
                      buf[RANK * count:(RANK + 1) * count], src[root][RANK * count:(RANK + 1) * count], dt)


def suite_big():
    """2**20 + 3 elements: every collective on a few types."""
    dts = (D.Float32, D.Bfloat16, D.Int8)
    suite_allreduce(counts=[BIG], dtypes=dts, ops=["sum", "max"])
    suite_reduce(counts=[BIG], dtypes=(D.Float32,), ops=["sum"])
    suite_reduce_scatter(counts=[BIG // N + 1], dtypes=(D.Float32,), ops=["sum"])
    suite_movement(counts=[BIG], dtypes=(D.Float32,))


def suite_rounding():
    """Halfway cases must round to nearest even after reducing in float."""
    if N != 2:
        return
    cases_ = {
        D.Float16: ([1.0, 1.0 + 2**-10], [2**-11, 2**-11], [1.0, 1.0 + 2**-9]),
        D.Bfloat16: ([1.0, 1.0 + 2**-7], [2**-8, 2**-8], [1.0, 1.0 + 2**-6]),
        D.Float8e4m3: ([1.0, 1.125], [0.0625, 0.0625], [1.0, 1.25]),
        D.Float8e5m2: ([1.0, 1.25], [0.125, 0.125], [1.0, 1.5]),
    }
    for dt, (a, bb, exp) in cases_.items():
        mine = np.array(a if RANK == 0 else bb, NP[dt])
        recv = np.zeros(2, NP[dt])
        b.all_reduce(ptr(mine), ptr(recv), 2, int(dt), int(b.RedOp.Sum), COMM, 0)
        CHECK.cases += 1
        if recv.astype(np.float64).tolist() != exp:
            failures.append(f"rounding {dt.name}: got {recv.astype(np.float64).tolist()}, "
                            f"expected {exp}")


def suite_premulsum_device():
    """A "device" (pointer) scalar is read when the collective runs."""
    for dt in (D.Float32, D.Int32, D.Bfloat16):
        scalar = np.array([3], NP[dt])
        h = b.red_op_create_pre_mul_sum(ptr(scalar), int(dt), int(b.ScalarResidence.Device), COMM)
        scalar[0] = 2  # changed after creation: the new value counts
        ins = [inputs(r, dt, 5) for r in range(N)]
        recv = np.zeros(5, NP[dt])
        b.all_reduce(ptr(ins[RANK]), ptr(recv), 5, int(dt), h, COMM, 0)
        check(f"premulsum device scalar {dt.name}", recv, reduce_ref(ins, dt, "premulsum", 2.0), dt)
        b.red_op_destroy(h, COMM)


def suite_p2p():
    """A ring of send/recv in one group, mixed collectives in a group, nested groups."""
    dt, count = D.Float32, 1000
    data = [inputs(r, dt, count, salt=4) for r in range(N)]
    recv = np.zeros(count, np.float32)
    right, left = (RANK + 1) % N, (RANK - 1) % N
    b.group_start()
    b.send(ptr(data[RANK]), count, int(dt), right, COMM, 0)
    b.recv(ptr(recv), count, int(dt), left, COMM, 0)
    b.group_end()
    check("ring send/recv", recv, data[left], dt)
    # large messages in a ring must not deadlock either
    big = [inputs(r, dt, 3 * 2**20, salt=5) for r in range(N)]
    recv = np.zeros(3 * 2**20, np.float32)
    b.group_start()
    b.recv(ptr(recv), recv.size, int(dt), left, COMM, 0)
    b.send(ptr(big[RANK]), recv.size, int(dt), right, COMM, 0)
    b.group_end()
    check("ring send/recv 12 MiB recv first", recv, big[left], dt)
    # every rank exchanges with every other rank in one group
    outs = [np.zeros(count, np.float32) for _ in range(N)]
    b.group_start()
    for p in range(N):
        b.send(ptr(data[RANK]), count, int(dt), p, COMM, 0)
        b.recv(ptr(outs[p]), count, int(dt), p, COMM, 0)
    b.group_end()
    for p in range(N):
        check(f"all-pairs from {p}", outs[p], data[p], dt)
    # nested groups with collectives and p2p mixed
    ins = [inputs(r, dt, 64, salt=6) for r in range(N)]
    ar = np.zeros(64, np.float32)
    ag = np.zeros(64 * N, np.float32)
    recv = np.zeros(count, np.float32)
    b.group_start()
    b.all_reduce(ptr(ins[RANK]), ptr(ar), 64, int(dt), int(b.RedOp.Sum), COMM, 0)
    b.group_start()
    b.all_gather(ptr(ins[RANK]), ptr(ag), 64, int(dt), COMM, 0)
    b.send(ptr(data[RANK]), count, int(dt), right, COMM, 0)
    b.recv(ptr(recv), count, int(dt), left, COMM, 0)
    b.group_end()
    b.group_end()
    check("group allreduce", ar, reduce_ref(ins, dt, "sum"), dt)
    check("group allgather", ag, np.concatenate(ins), dt)
    check("group ring", recv, data[left], dt)


def suite_comms():
    """split (even/odd, NOCOLOR), shrink, queries, async error."""
    CHECK.cases += 1
    if b.comm_count(COMM) != N or b.comm_user_rank(COMM) != RANK:
        failures.append("comm_count / comm_user_rank")
    if b.comm_get_async_error(COMM) != 0:
        failures.append("async error on a healthy comm")
    # even/odd split, key reverses the order
    sub = b.comm_split(COMM, RANK % 2, -RANK, None)
    members = [r for r in range(N) if r % 2 == RANK % 2]
    members.sort(key=lambda r: -r)
    if b.comm_count(sub) != len(members) or b.comm_user_rank(sub) != members.index(RANK):
        failures.append(f"split: count {b.comm_count(sub)} rank {b.comm_user_rank(sub)}")
    x = np.array([RANK], np.int64)
    y = np.zeros(1, np.int64)
    b.all_reduce(ptr(x), ptr(y), 1, int(D.Int64), int(b.RedOp.Sum), sub, 0)
    check("split allreduce", y, np.array([sum(members)], np.int64), D.Int64)
    b.comm_destroy(sub)
    # NOCOLOR: rank 0 opts out and gets a null communicator
    sub = b.comm_split(COMM, -1 if RANK == 0 else 1, 0, None)
    CHECK.cases += 1
    if RANK == 0 and sub != 0:
        failures.append("NOCOLOR did not give a null communicator")
    if RANK != 0:
        if b.comm_count(sub) != N - 1:
            failures.append("NOCOLOR split size")
        b.comm_destroy(sub)
    # shrink excluding the last rank (the excluded rank does not take part)
    if N > 1:
        if RANK != N - 1:
            sh = b.comm_shrink(COMM, [N - 1], 1, None, 0)
            CHECK.cases += 1
            if b.comm_count(sh) != N - 1 or b.comm_user_rank(sh) != RANK:
                failures.append("shrink size/rank")
            y = np.zeros(1, np.int64)
            b.all_reduce(ptr(x), ptr(y), 1, int(D.Int64), int(b.RedOp.Sum), sh, 0)
            check("shrink allreduce", y, np.array([sum(range(N - 1))], np.int64), D.Int64)
            b.comm_destroy(sh)
    # the parent communicator still works after all that
    y = np.zeros(1, np.int64)
    b.all_reduce(ptr(x), ptr(y), 1, int(D.Int64), int(b.RedOp.Sum), COMM, 0)
    check("parent after split/shrink", y, np.array([sum(range(N))], np.int64), D.Int64)


def suite_rccl():
    from nccl.bindings import rocm_extensions as rx

    dt = D.Float32
    ins = [inputs(r, dt, 33) for r in range(N)]
    bias = np.arange(33, dtype=np.float32)
    recv = np.zeros(33, np.float32)
    rx.all_reduce_with_bias(ptr(ins[RANK]), ptr(recv), 33, int(dt), int(b.RedOp.Sum), COMM, 0,
                            ptr(bias))
    check("allreduce_with_bias", recv, reduce_ref(ins, dt, "sum") + bias, dt)
    # alltoallv with uneven counts: rank r sends (r + p + 1) elements to rank p
    cnt = lambda r, p: r + p + 1  # noqa: E731
    sc = [cnt(RANK, p) for p in range(N)]
    sd = list(np.cumsum([0] + sc[:-1]))
    rc = [cnt(p, RANK) for p in range(N)]
    rd = list(np.cumsum([0] + rc[:-1]))
    send = {r: inputs(r, dt, sum(cnt(r, p) for p in range(N)), salt=7) for r in range(N)}
    recv = np.zeros(sum(rc), np.float32)
    rx.all_to_all_v(ptr(send[RANK]), sc, [int(v) for v in sd], ptr(recv), rc,
                    [int(v) for v in rd], int(dt), COMM, 0)
    exp = []
    for p in range(N):
        off = sum(cnt(p, q) for q in range(RANK))
        exp.append(send[p][off:off + cnt(p, RANK)])
    check("alltoallv uneven", recv, np.concatenate(exp), dt)


SUITES = {
    "allreduce": suite_allreduce, "reduce": suite_reduce, "reduce_scatter": suite_reduce_scatter,
    "movement": suite_movement, "big": suite_big, "rounding": suite_rounding,
    "premulsum_device": suite_premulsum_device, "p2p": suite_p2p, "comms": suite_comms,
    "rccl": suite_rccl,
}

if __name__ == "__main__":
    env = nccl.run.environment()
    bind(b.comm_init_rank(env.nranks, env.unique_id, env.rank), env.rank, env.nranks,
         Checker())
    for name in sys.argv[1:]:
        try:
            SUITES[name]()
        except Exception as e:  # report, don't hide: the parent test fails on it
            failures.append(f"{name}: {type(e).__name__}: {e}")
    b.comm_destroy(COMM)
    # one write per line: ranks share the output pipe
    os.write(1, (json.dumps({"rank": RANK, "cases": CHECK.cases, "failures": failures[:20],
                             "nfailures": len(failures)}) + "\n").encode())
