"""One rank of the rocm_extensions tests on the host backend (run by
tests/test_rocm_extensions.py through ``python -m nccl.run``):
``Communicator.allreduce_with_bias`` and ``Communicator.alltoallv`` with
uneven counts, checked against NumPy, and their argument validation.
Prints one JSON line: {"rank", "cases", "failures"}.
"""
from __future__ import annotations

import json

import numpy as np

import nccl.core as nc
from refdata import NP, Checker, D, inputs

CHECK = Checker()
expect_invalid = CHECK.expect_invalid
COMM = nc.Communicator.from_env()
RANK, N = COMM.rank, COMM.nranks
DTYPES = [D.Int8, D.Int32, D.Uint64, D.Float16, D.Float32, D.Float64, D.Bfloat16]


def allreduce_with_bias():
    for dt in DTYPES:
        for count in (1, 7, 1023):
            ins = [inputs(r, dt, count) for r in range(N)]
            bias = inputs(99, dt, count, salt=5)
            exp = ins[0].astype(np.float64)
            for a in ins[1:]:
                exp = exp + a.astype(np.float64)
            exp = (exp + bias.astype(np.float64)).astype(NP[dt])
            out = np.zeros(count, NP[dt])
            COMM.allreduce_with_bias(ins[RANK], out, nc.SUM, bias)
            CHECK.check(f"allreduce_with_bias {dt.name} n={count}", out, exp, dt)
            # in place, stream keyword
            buf = ins[RANK].copy()
            COMM.allreduce_with_bias(buf, buf, nc.SUM, bias, stream=None)
            CHECK.check(f"allreduce_with_bias in-place {dt.name} n={count}", buf, exp, dt)
    # max with a bias
    ins = [inputs(r, D.Float32, 9) for r in range(N)]
    bias = np.full(9, 0.5, np.float32)
    out = np.empty(9, np.float32)
    COMM.allreduce_with_bias(ins[RANK], out, nc.MAX, bias)
    CHECK.check("allreduce_with_bias max", out, np.max(ins, axis=0) + bias, D.Float32)


def layout(src: int, dst: int) -> int:
    """Elements rank src sends to rank dst: uneven, some zero."""
    return (3 * src + 5 * dst + 1) % 4 + (src == dst)


def alltoallv():
    for dt in DTYPES:
        sendcounts = [layout(RANK, j) for j in range(N)]
        recvcounts = [layout(j, RANK) for j in range(N)]
        # displacements with gaps, in elements
        sdispls, off = [], 0
        for c in sendcounts:
            sdispls.append(off)
            off += c + 1
        send = inputs(RANK, dt, off, salt=11)
        rdispls, roff = [], 2
        for c in reversed(recvcounts):  # reverse placement: displs need not be monotone
            rdispls.insert(0, roff)
            roff += c + 2
        rdispls = rdispls
        recv = np.zeros(roff, NP[dt])
        COMM.alltoallv(send, sendcounts, sdispls, recv, recvcounts, rdispls)
        exp = np.zeros(roff, NP[dt])
        for j in range(N):
            js = [layout(j, k) for k in range(N)]
            jd, o = [], 0
            for c in js:
                jd.append(o)
                o += c + 1
            jsend = inputs(j, dt, o, salt=11)
            exp[rdispls[j]:rdispls[j] + recvcounts[j]] = jsend[jd[RANK]:jd[RANK] + js[RANK]]
        CHECK.check(f"alltoallv {dt.name}", recv, exp, dt)
    # tuples and numpy int arrays as count/displacement sequences
    cnt = [2] * N
    dis = np.arange(N, dtype=np.int64) * 2
    send = np.arange(2 * N, dtype=np.int32) + 100 * RANK
    recv = np.zeros(2 * N, np.int32)
    COMM.alltoallv(send, tuple(cnt), tuple(int(x) for x in dis), recv, cnt, list(dis), stream=0)
    exp = np.concatenate([np.arange(2 * RANK, 2 * RANK + 2, dtype=np.int32) + 100 * j
                          for j in range(N)])
    CHECK.check("alltoallv tuples", recv, exp, D.Int32)


def validation():
    a = np.zeros(8, np.float32)
    out = np.zeros(8, np.float32)
    expect_invalid("bias dtype", lambda: COMM.allreduce_with_bias(a, out, nc.SUM,
                                                                  np.zeros(8, np.float64)),
                   "Dtype mismatch")
    expect_invalid("bias short", lambda: COMM.allreduce_with_bias(a, out, nc.SUM,
                                                                  np.zeros(4, np.float32)),
                   "at least 8 elements")
    expect_invalid("recv short", lambda: COMM.allreduce_with_bias(a, np.zeros(4, np.float32),
                                                                  nc.SUM, a),
                   "at least 8 elements")
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    expect_invalid("recv read-only", lambda: COMM.allreduce_with_bias(a, ro, nc.SUM, a), "")
    ones = [1] * N
    zeros = [0] * N
    expect_invalid("sendcounts length", lambda: COMM.alltoallv(
        a, [1] * (N + 1), zeros + [0], out, ones, zeros), "one entry per rank")
    expect_invalid("rdispls length", lambda: COMM.alltoallv(
        a, ones, zeros, out, ones, zeros[:-1]), "one entry per rank")
    expect_invalid("send extent", lambda: COMM.alltoallv(
        a, ones, [0] * (N - 1) + [8], out, ones, zeros), "exceeds sendbuf")
    expect_invalid("recv extent", lambda: COMM.alltoallv(
        a, ones, zeros, out, [9] + [1] * (N - 1), zeros), "exceeds recvbuf")
    expect_invalid("counts scalar", lambda: COMM.alltoallv(a, 1, 0, out, 1, 0),
                   "sequences of one int per rank")
    expect_invalid("dtype mismatch", lambda: COMM.alltoallv(
        a, ones, zeros, np.zeros(8, np.int32), ones, zeros), "")
    CHECK.cases += 1
    try:
        COMM.alltoallv(a, [-1] * N, zeros, out, ones, zeros)
        CHECK.failures.append("negative count accepted")
    except (nc.NcclInvalid, OverflowError, ValueError, TypeError):
        pass


SUITES = {"bias": allreduce_with_bias, "alltoallv": alltoallv, "validation": validation}

if __name__ == "__main__":
    import sys

    for name in sys.argv[1:]:
        try:
            SUITES[name]()
        except Exception as e:  # noqa: BLE001 - reported as a failure
            CHECK.failures.append(f"suite {name}: {type(e).__name__}: {e}")
    COMM.destroy()
    print(json.dumps({"rank": RANK, "cases": CHECK.cases, "failures": CHECK.failures}))
