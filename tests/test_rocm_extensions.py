"""RCCL extensions at the high level on the host backend, 2 and 4 ranks:
``Communicator.allreduce_with_bias`` and ``Communicator.alltoallv`` with
uneven counts, checked against NumPy, and their argument validation (the
nccl.testing plugin)."""
from __future__ import annotations

import numpy as np
import pytest

import nccl.core as nc
from refdata import NP, D, inputs
from conftest import host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

DTYPES = [D.Int8, D.Int32, D.Uint64, D.Float16, D.Float32, D.Float64, D.Bfloat16]


@pytest.mark.nccl(nranks=[2, 4])
def test_allreduce_with_bias(comm, check):
    rank, n = comm.rank, comm.nranks
    for dt in DTYPES:
        for count in (1, 7, 1023):
            ins = [inputs(r, dt, count) for r in range(n)]
            bias = inputs(99, dt, count, salt=5)
            exp = ins[0].astype(np.float64)
            for a in ins[1:]:
                exp = exp + a.astype(np.float64)
            exp = (exp + bias.astype(np.float64)).astype(NP[dt])
            out = np.zeros(count, NP[dt])
            comm.allreduce_with_bias(ins[rank], out, nc.SUM, bias)
            check.check(f"allreduce_with_bias {dt.name} n={count}", out, exp, dt)
            # in place, stream keyword
            buf = ins[rank].copy()
            comm.allreduce_with_bias(buf, buf, nc.SUM, bias, stream=None)
            check.check(f"allreduce_with_bias in-place {dt.name} n={count}", buf, exp, dt)
    # max with a bias
    ins = [inputs(r, D.Float32, 9) for r in range(n)]
    bias = np.full(9, 0.5, np.float32)
    out = np.empty(9, np.float32)
    comm.allreduce_with_bias(ins[rank], out, nc.MAX, bias)
    check.check("allreduce_with_bias max", out, np.max(ins, axis=0) + bias, D.Float32)
    check.assert_ok()


def layout(src: int, dst: int) -> int:
    """Elements rank src sends to rank dst: uneven, some zero."""
    return (3 * src + 5 * dst + 1) % 4 + (src == dst)


def gapped(counts):
    """Displacements (in elements) with a gap of one after each part, and the
    length they need."""
    displs, off = [], 0
    for c in counts:
        displs.append(off)
        off += c + 1
    return displs, off


@pytest.mark.nccl(nranks=[2, 4])
def test_alltoallv_uneven(comm, check):
    rank, n = comm.rank, comm.nranks
    for dt in DTYPES:
        sendcounts = [layout(rank, j) for j in range(n)]
        recvcounts = [layout(j, rank) for j in range(n)]
        sdispls, off = gapped(sendcounts)
        send = inputs(rank, dt, off, salt=11)
        rdispls, roff = [], 2
        for c in reversed(recvcounts):  # reverse placement: displs need not be monotone
            rdispls.insert(0, roff)
            roff += c + 2
        rdispls = rdispls
        recv = np.zeros(roff, NP[dt])
        comm.alltoallv(send, sendcounts, sdispls, recv, recvcounts, rdispls)
        exp = np.zeros(roff, NP[dt])
        for j in range(n):
            js = [layout(j, k) for k in range(n)]
            jd, o = gapped(js)
            jsend = inputs(j, dt, o, salt=11)
            exp[rdispls[j]:rdispls[j] + recvcounts[j]] = jsend[jd[rank]:jd[rank] + js[rank]]
        check.check(f"alltoallv {dt.name}", recv, exp, dt)
    # tuples and numpy int arrays as count/displacement sequences
    cnt = [2] * n
    dis = np.arange(n, dtype=np.int64) * 2
    send = np.arange(2 * n, dtype=np.int32) + 100 * rank
    recv = np.zeros(2 * n, np.int32)
    comm.alltoallv(send, tuple(cnt), tuple(int(x) for x in dis), recv, cnt, list(dis), stream=0)
    exp = np.concatenate([np.arange(2 * rank, 2 * rank + 2, dtype=np.int32) + 100 * j
                          for j in range(n)])
    check.check("alltoallv tuples", recv, exp, D.Int32)
    check.assert_ok()


@pytest.mark.nccl(nranks=[2, 4])
def test_argument_validation(comm, check):
    n = comm.nranks
    a = np.zeros(8, np.float32)
    out = np.zeros(8, np.float32)
    check.expect_invalid("bias dtype", lambda: comm.allreduce_with_bias(a, out, nc.SUM,
                                                                  np.zeros(8, np.float64)),
                   "Dtype mismatch")
    check.expect_invalid("bias short", lambda: comm.allreduce_with_bias(a, out, nc.SUM,
                                                                  np.zeros(4, np.float32)),
                   "at least 8 elements")
    check.expect_invalid("recv short", lambda: comm.allreduce_with_bias(a, np.zeros(4, np.float32),
                                                                  nc.SUM, a),
                   "at least 8 elements")
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    check.expect_invalid("recv read-only", lambda: comm.allreduce_with_bias(a, ro, nc.SUM, a), "")
    ones = [1] * n
    zeros = [0] * n
    check.expect_invalid("sendcounts length", lambda: comm.alltoallv(
        a, [1] * (n + 1), zeros + [0], out, ones, zeros), "one entry per rank")
    check.expect_invalid("rdispls length", lambda: comm.alltoallv(
        a, ones, zeros, out, ones, zeros[:-1]), "one entry per rank")
    check.expect_invalid("send extent", lambda: comm.alltoallv(
        a, ones, [0] * (n - 1) + [8], out, ones, zeros), "exceeds sendbuf")
    check.expect_invalid("recv extent", lambda: comm.alltoallv(
        a, ones, zeros, out, [9] + [1] * (n - 1), zeros), "exceeds recvbuf")
    check.expect_invalid("counts scalar", lambda: comm.alltoallv(a, 1, 0, out, 1, 0),
                   "sequences of one int per rank")
    check.expect_invalid("dtype mismatch", lambda: comm.alltoallv(
        a, ones, zeros, np.zeros(8, np.int32), ones, zeros), "")
    check.cases += 1
    try:
        comm.alltoallv(a, [-1] * n, zeros, out, ones, zeros)
        check.failures.append("negative count accepted")
    except (nc.NcclInvalid, OverflowError, ValueError, TypeError):
        pass
    check.assert_ok()
