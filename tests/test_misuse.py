"""Misuse that used to give silently wrong results or crashes.

- overlapping send and receive buffers (only NCCL's exact in-place forms are
  allowed);
- one communicator used by two threads at once, and destroy() from another
  thread while a call on the communicator is in progress;
- a communicator inherited by a fork() child;
- non-integer ops, roots, peers, counts, colors and keys.
"""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from host_ranks import needs_host, run_ranks
from nccl._errors import NcclInvalid
from stub_comm import COMM, calls

# --------------------------------------------------------------- overlap

OVERLAP = "overlap"


def test_partial_overlap_refused(stub):
    comm = nc.Communicator(COMM)
    n = comm.nranks
    x = np.zeros(8 * n, np.float32)
    raw = np.zeros(400, np.uint8)
    before = calls(stub)
    for call in (
        lambda: comm.allreduce(x[0:32], x[8:40], nc.SUM),
        lambda: comm.allreduce(x[8:40], x[0:32], nc.SUM),
        lambda: comm.reduce(x[0:32], x[1:33], nc.SUM),  # root=None: every rank receives
        lambda: comm.allgather(x[1:5], x[0:4 * n]),
        lambda: comm.gather(x[1:5], x[0:4 * n]),
        lambda: comm.reduce_scatter(x[0:4 * n], x[1:5], nc.SUM),
        lambda: comm.alltoall(x[0:4 * n], x[2:2 + 4 * n]),
        lambda: comm.allreduce((raw[0:200], nc.FLOAT32), (raw[4:204], nc.FLOAT32), nc.SUM),
        lambda: comm.allreduce((x.view(np.uint8), 128, nc.FLOAT32), x[1:], nc.SUM),
    ):
        with pytest.raises(NcclInvalid, match=OVERLAP):
            call()
    assert calls(stub) == before, "a refused call reached the library"
    comm.allreduce(x, x, nc.SUM)
    comm.allreduce(x[:16], x, nc.SUM)  # the call uses 16 elements of both: the same memory
    comm.alltoall(x, x)
    comm.allreduce(x[:8], x[8:16], nc.SUM)  # adjacent, not overlapping
    comm.allreduce((raw[0:200], nc.FLOAT32), (raw[200:400], nc.FLOAT32), nc.SUM)
    assert calls(stub) == before + 5


@needs_host
def test_overlap_refused_and_in_place_forms_correct(tmp_path):
    code = r"""
def refused(call):
    try:
        call()
    except nc.NcclInvalid as e:
        return "overlap" in str(e)
    return False

c = 8
x = np.zeros(4 * c * N, np.float32)
out = {}
if RANK == 0:   # rooted refusals: the root refuses before the library is reached
    out["rooted"] = [refused(f) for f in (
        lambda: comm.reduce(x[0:c], x[1:c + 1], nc.SUM, root=0),
        lambda: comm.broadcast(x[0:c], x[2:c + 2], root=0),
        lambda: comm.gather(x[1:c + 1], x[0:c * N], root=0),
        lambda: comm.scatter(x[0:c * N], x[3:c + 3], root=0),
    )]
base = np.arange(c * N, dtype=np.float32) + 100 * RANK
def fresh():
    return base.copy()
res = {}
a = fresh(); comm.allreduce(a, a, nc.SUM)
res["allreduce"] = a.tolist()
a = fresh(); comm.alltoall(a, a)
res["alltoall"] = a.tolist()
a = fresh(); comm.allgather(a[RANK * c:(RANK + 1) * c], a)
res["allgather"] = a.tolist()
a = fresh(); comm.reduce_scatter(a, a[RANK * c:(RANK + 1) * c], nc.SUM)
res["reduce_scatter"] = a[RANK * c:(RANK + 1) * c].tolist()
a = fresh(); comm.gather(a[RANK * c:(RANK + 1) * c], a if RANK == 0 else None, root=0)
res["gather"] = a.tolist()
a = fresh(); comm.scatter(a if RANK == 1 else None, a[RANK * c:(RANK + 1) * c], root=1)
res["scatter"] = a[RANK * c:(RANK + 1) * c].tolist()
report(res=res, **out)
comm.destroy()
"""
    r0, r1 = run_ranks(tmp_path, code, 2)
    assert r0["rooted"] == [True] * 4, r0
    c, n = 8, 2
    base = [np.arange(c * n, dtype=np.float32) + 100 * r for r in range(n)]
    want = {
        "allreduce": [base[0] + base[1]] * n,
        "alltoall": [np.concatenate([base[s][r * c:(r + 1) * c] for s in range(n)])
                     for r in range(n)],
        "allgather": [np.concatenate([base[s][s * c:(s + 1) * c] for s in range(n)])] * n,
        "reduce_scatter": [(base[0] + base[1])[r * c:(r + 1) * c] for r in range(n)],
        "gather": [np.concatenate([base[s][s * c:(s + 1) * c] for s in range(n)]), base[1]],
        "scatter": [base[1][r * c:(r + 1) * c] for r in range(n)],
    }
    for r, rep in enumerate((r0, r1)):
        for k, v in want.items():
            assert rep["res"][k] == v[r].tolist(), (r, k)


# --------------------------------------------------------------- threads

class Blocking:
    """A DLPack-free producer whose __array_interface__ blocks until released:
    it holds a call inside the communicator for as long as the test wants."""

    def __init__(self, a):
        self.a = a
        self.entered = threading.Event()
        self.go = threading.Event()

    @property
    def __array_interface__(self):
        self.entered.set()
        assert self.go.wait(60)
        return self.a.__array_interface__


def test_concurrent_use_refused_and_destroy_from_another_thread(stub):
    comm = nc.Communicator(COMM)
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    slow = Blocking(x)
    errors = []

    def first():
        try:
            comm.allreduce(slow, y, nc.SUM)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=first)
    t.start()
    assert slow.entered.wait(60)
    try:
        with pytest.raises(NcclInvalid, match="in use by another thread"):
            comm.allreduce(x, y, nc.SUM)
        with pytest.raises(NcclInvalid, match="in use by another thread"):
            comm.destroy()
        with pytest.raises(NcclInvalid, match="in use by another thread"):
            comm.split(0)
        assert comm.is_valid
    finally:
        slow.go.set()
        t.join(60)
    assert errors == []
    comm.allreduce(x, y, nc.SUM)  # free again
    comm.destroy()


@needs_host
def test_two_threads_on_one_communicator(tmp_path):
    code = r"""
import threading, time
x = np.full(1 << 16, RANK + 1, np.float32)
res = {}
if RANK == 1:
    time.sleep(4.0)              # rank 0's first call blocks meanwhile
    comm.allreduce(x, x, nc.SUM)
    report(ok=bool((x == 3).all()))
else:
    started = threading.Event()
    def blocked():
        started.set()
        comm.allreduce(x, x, nc.SUM)
    t = threading.Thread(target=blocked)
    t.start()
    started.wait()
    time.sleep(1.0)              # the thread is inside the all-reduce, waiting for rank 1
    y = np.ones(1 << 16, np.float32)
    for what, call in (("allreduce", lambda: comm.allreduce(y, y, nc.SUM)),
                       ("destroy", comm.destroy)):
        try:
            call()
            res[what] = "accepted"
        except nc.NcclInvalid as e:
            res[what] = str(e)
    t.join()
    report(ok=bool((x == 3).all()), **res)
comm.destroy()
"""
    r0, r1 = run_ranks(tmp_path, code, 2, NCCL4PY_HOST_TIMEOUT="20")
    assert r1["ok"] and r0["ok"], (r0, r1)
    assert "in use by another thread" in r0["allreduce"], r0
    assert "in use by another thread" in r0["destroy"], r0


@needs_host
def test_threads_with_their_own_communicators_run_in_parallel(tmp_path):
    code = r"""
import threading
comms = [comm] + [comm.split(0, RANK) for _ in range(3)]
errors = []
def work(t):
    try:
        c = comms[t]
        x = np.zeros(100 + t, np.float32)
        for i in range(200):
            x[:] = (RANK + 1) * (i + t)
            c.allreduce(x, x, nc.SUM)
            assert (x == 3 * (i + t)).all(), (t, i)
    except BaseException as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(t,)) for t in range(len(comms))]
for t in ts: t.start()
for t in ts: t.join()
for c in comms: c.destroy()
report(errors=errors)
"""
    assert all(r["errors"] == [] for r in run_ranks(tmp_path, code, 2))


# ------------------------------------------------------------------- fork

@needs_host
def test_fork_child_cannot_use_the_communicator(tmp_path):
    code = r"""
x = np.full(4, RANK + 1, np.float32)
child = {}
if RANK == 0:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = {}
        try:
            comm.allreduce(np.full(4, 100.0, np.float32), np.zeros(4, np.float32), nc.SUM)
            out["use"] = "accepted"
        except nc.NcclInvalid as e:
            out["use"] = str(e)
        try:
            comm.split(0)
            out["split"] = "accepted"
        except nc.NcclInvalid as e:
            out["split"] = str(e)
        comm.destroy()            # forgets the handle, leaves the parent's alone
        out["valid_after_destroy"] = comm.is_valid
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 65536).decode())
    os.waitpid(pid, 0)
comm.allreduce(x, x, nc.SUM)      # the parent's communicator still works
report(child=child, got=x.tolist())
comm.destroy()
"""
    r0, r1 = run_ranks(tmp_path, code, 2, NCCL4PY_HOST_TIMEOUT="20")
    assert r0["got"] == r1["got"] == [3.0] * 4, (r0, r1)
    child = r0["child"]
    assert "fork" in child["use"] and "fork" in child["split"], child
    assert child["valid_after_destroy"] is False


def test_fork_child_destroy_does_not_reach_the_library(stub):
    comm = nc.Communicator(COMM)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            before = calls(stub)
            try:
                comm.allreduce(np.ones(4, np.float32), np.ones(4, np.float32), nc.SUM)
            except NcclInvalid as e:
                if "fork" in str(e):
                    comm.destroy()
                    comm.abort()
                    code = 0 if calls(stub) == before and not comm.is_valid else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"\x00"
    comm.allreduce(np.ones(4, np.float32), np.ones(4, np.float32), nc.SUM)  # parent unaffected
    comm.destroy()


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


@pytest.mark.parametrize("devices, error, message", [
    ([-1, 2], NcclInvalid, r"device ids must not be negative, got \[-1, 2\]"),
    ((0, -5), NcclInvalid, "device ids must not be negative"),
    (-1, NcclInvalid, "the number of devices must not be negative, got -1"),
    ([0, 0], NcclInvalid, r"repeated: 0 \(in \[0, 0\]\)"),
    ([3, 1, 3, 1, 2], NcclInvalid, "repeated: 1, 3"),
    ([True, 0], TypeError, "a device id must be an integer, got True"),
    ([0, "1"], TypeError, "'str' object cannot be interpreted as an integer"),
], ids=repr)
def test_init_all_refuses_bad_device_lists_before_the_library(stub, devices, error, message):
    """A negative, repeated or non-integer device (as NCCL's ncclCommInitAll
    refuses them) is refused before any library call, on every backend."""
    before = calls(stub)
    with pytest.raises(error, match=message):
        nc.Communicator.init_all(devices)
    assert calls(stub) == before


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
