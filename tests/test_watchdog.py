"""The hang watchdog, the flight recorder and `python -m nccl.trace`.

Three ranks of the host backend (separate processes, `hostproc.Rank`) share
a communicator with a 2 s watchdog timeout (the backend's own timeout is far
longer); after four good all-reduces rank 2 misbehaves: it skips the fifth,
calls a different collective, or its process ends.  The survivors must fail
within the timeout plus a margin, every rank must leave its record in
NCCL4PY_TRACE_DIR, and the analyzer must name rank 2 and the call.  A clean
run analyses as "no problem".  The GPU path (events, async errors, abort)
runs in a subprocess on the recording stub posing as RCCL with the stub HIP
runtime, whose events can be held incomplete.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import build_stub, clean_env
from hostproc import Rank, host_env
from test_host_collectives import host_available

needs_host = pytest.mark.skipif(not host_available(), reason="host backend not built")

WATCHDOG = 2.0
MARGIN = 20.0  # a loaded 2-core machine; the backend's own timeout is 300 s

WORKER = r"""
import json, os, sys, time
import numpy as np
import nccl.core as nc

scenario, rank, uid = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
comm = nc.Communicator.init(3, rank, nc.UniqueId.from_bytes(uid), timeout=float(sys.argv[4]))
x = np.ones(256, np.float32)
for i in range(4):
    comm.allreduce(x, x, nc.SUM)
print(json.dumps({"ready": rank}), flush=True)
if rank == 2 and scenario == "skip":
    time.sleep(float(sys.argv[4]) + 3)   # never calls the fifth all-reduce
    sys.exit(0)
if rank == 2 and scenario == "dies":
    raise SystemExit(3)
t0 = time.monotonic()
out = {"rank": rank}
try:
    if rank == 2 and scenario == "different":
        comm.broadcast(x, x, 0)
    else:
        comm.allreduce(x, x, nc.SUM)
        if scenario == "clean":
            comm.broadcast(x, x, 0)
    out["ok"] = True
except Exception as e:
    out.update(error=type(e).__name__, message=str(e), seq=getattr(e, "seq", None),
               operation=getattr(e, "operation", None))
out["elapsed"] = time.monotonic() - t0
try:
    comm.allreduce(x, x, nc.SUM) if "error" in out else None
except Exception as e:
    out["again"] = type(e).__name__
print(json.dumps(out), flush=True)
if "error" in out:
    comm.abort()
else:
    comm.destroy()
"""


def run_scenario(tmp_path, scenario: str, **env: str):
    uid = subprocess.run([sys.executable, "-c", "import nccl.core as nc; "
                          "print(bytes(nc.get_unique_id()).hex())"], capture_output=True,
                         text=True, env=host_env(), check=True, timeout=120).stdout.strip()
    tdir = tmp_path / "trace"
    e = host_env(NCCL4PY_TRACE_DIR=str(tdir), NCCL4PY_HOST_TIMEOUT="300", **env)
    ranks = [Rank(WORKER, scenario, str(r), uid, str(WATCHDOG), env=e) for r in range(3)]
    for r in ranks:
        assert "ready" in r.event(timeout=120)
    results = {}
    for i, r in enumerate(ranks):
        if scenario in ("skip", "dies") and i == 2:
            continue
        results[i] = r.event(timeout=WATCHDOG + MARGIN + 60)
    codes = [r.wait(timeout=120) for r in ranks]
    return results, codes, tdir


def analyse(tdir) -> tuple[int, dict, str]:
    env = clean_env()
    js = subprocess.run([sys.executable, "-m", "nccl.trace", str(tdir), "--json"],
                        capture_output=True, text=True, env=env, timeout=60)
    text = subprocess.run([sys.executable, "-m", "nccl.trace", str(tdir)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert js.returncode == text.returncode, (js.stderr, text.stderr)
    return js.returncode, json.loads(js.stdout), text.stdout


def records(tdir) -> dict[int, dict]:
    out = {}
    for p in tdir.glob("rank*.json"):
        rec = json.loads(p.read_text())
        out[rec["rank"]] = rec
    return out


@needs_host
def test_skipped_collective_times_out_and_is_named(tmp_path):
    results, codes, tdir = run_scenario(tmp_path, "skip")
    for r in (0, 1):
        res = results[r]
        assert res.get("error") in ("NcclTimeoutError", "NCCLError"), res
        assert res["elapsed"] < WATCHDOG + MARGIN, res
    timed_out = [results[r] for r in (0, 1) if results[r]["error"] == "NcclTimeoutError"]
    assert timed_out, results  # the first rank to time out is the watchdog's
    for res in timed_out:
        assert res["elapsed"] >= WATCHDOG * 0.9, res
        assert (res["operation"], res["seq"]) == ("allreduce", 5), res
        assert "allreduce #5" in res["message"] and res["again"] == "NcclTimeoutError", res
    assert codes == [0, 0, 0]
    recs = records(tdir)
    assert sorted(recs) == [0, 1, 2]
    assert [e["seq"] for e in recs[2]["entries"]] == [1, 2, 3, 4]
    assert recs[2]["reason"] == "exit"
    rc, diag, text = analyse(tdir)
    assert rc == 1, text
    (c,) = diag["communicators"]
    assert c["diverged"]["seq"] == 5 and c["diverged"]["op"] == "allreduce", c
    assert c["diverged"]["missing"] == [2] and c["diverged"]["waiting"] == [0, 1], c
    assert "rank 2 did not call allreduce #5; ranks 0,1 waited" in text, text
    assert all(c["last_completed"][str(r)] == {"seq": 4, "op": "allreduce"} for r in range(3))


@needs_host
def test_different_collective_is_named(tmp_path):
    results, codes, tdir = run_scenario(tmp_path, "different")
    for r in range(3):
        assert results[r].get("error") in ("NcclTimeoutError", "NCCLError"), results[r]
        assert results[r]["elapsed"] < WATCHDOG + MARGIN, results[r]
    recs = records(tdir)
    assert sorted(recs) == [0, 1, 2]
    rc, diag, text = analyse(tdir)
    assert rc == 1, text
    (c,) = diag["communicators"]
    (m,) = [m for m in c["mismatches"] if m["seq"] == 5]
    assert m["field"] == "op" and m["values"] == {"allreduce": [0, 1], "broadcast": [2]}, c
    assert "mismatched op at collective #5: ranks 0,1: allreduce; rank 2: broadcast" in text


@needs_host
def test_dead_rank_is_named(tmp_path):
    results, codes, tdir = run_scenario(tmp_path, "dies")
    for r in (0, 1):
        assert results[r].get("error") in ("NcclTimeoutError", "NCCLError"), results[r]
        assert results[r]["elapsed"] < WATCHDOG + MARGIN, results[r]
    assert codes[2] == 3
    recs = records(tdir)
    assert sorted(recs) == [0, 1, 2]
    rc, diag, text = analyse(tdir)
    assert rc == 1, text
    (c,) = diag["communicators"]
    assert c["diverged"]["missing"] == [2] and c["diverged"]["seq"] == 5, c
    assert "rank 2 did not call allreduce #5" in text and "process ended" in text, text


@needs_host
def test_clean_run_is_no_problem(tmp_path):
    results, codes, tdir = run_scenario(tmp_path, "clean")
    assert all(results[r].get("ok") for r in range(3)), results
    assert codes == [0, 0, 0]
    recs = records(tdir)
    assert sorted(recs) == [0, 1, 2]
    for rec in recs.values():
        assert [(e["seq"], e["op"], e["state"]) for e in rec["entries"]] == \
            [(i, "allreduce", "done") for i in range(1, 6)] + [(6, "broadcast", "done")]
        assert rec["aborted"] is None and rec["nranks"] == 3 and rec["pid"] > 0
    rc, diag, text = analyse(tdir)
    assert rc == 0 and not diag["problem"], text
    assert "no problem" in text


def test_analyzer_without_records(tmp_path):
    p = subprocess.run([sys.executable, "-m", "nccl.trace", str(tmp_path)], capture_output=True,
                       text=True, env=clean_env(), timeout=60)
    assert p.returncode == 2 and "no flight records" in p.stderr


def test_analyzer_reports_missing_record(tmp_path):
    """A rank whose process died without a record (SIGKILL) is named."""
    entry = {"seq": 1, "kind": "coll", "op": "allreduce", "count": 4, "recvcount": 4,
             "dtype": "float32", "redop": "sum", "root": -1, "peer": -1, "sendbuf": "0x1",
             "recvbuf": "0x1", "stream": "0x0", "group_depth": 0, "enqueue": 10.0,
             "start": 10.0, "end": None, "state": "aborted", "status": -1}
    for r in (0, 1):
        (tmp_path / f"rank{r}.json").write_text(json.dumps({
            "format": "nccl4py-trace-1", "reason": "timeout", "rank": r, "nranks": 3,
            "host": "h", "pid": 1, "comm_hash": "abc", "comm_index": 0, "time": 14.0,
            "calls": 1, "aborted": None, "entries": [entry]}))
    from nccl import trace

    diag = trace.analyze(trace.load(tmp_path))
    (c,) = diag["communicators"]
    assert c["missing_records"] == [[2, 2]] and c["missing_count"] == 1 and diag["problem"]
    assert any("no record from rank 2" in m for m in c["messages"])


def _records(tmp_path, op, counts):
    """A record per rank with one completed call of op, rank r's send count
    counts[r]."""
    for r, count in enumerate(counts):
        entry = {"seq": 1, "kind": "coll", "op": op, "count": count, "recvcount": 8,
                 "dtype": "float32", "redop": "sum", "root": 0, "peer": -1, "sendbuf": "0x1",
                 "recvbuf": "0x2", "stream": "0x0", "group_depth": 0, "enqueue": 10.0,
                 "start": 10.0, "end": 10.5, "state": "done", "status": 0}
        (tmp_path / f"rank{r}.json").write_text(json.dumps({
            "format": "nccl4py-trace-1", "reason": "request", "rank": r,
            "nranks": len(counts), "host": "h", "pid": 1, "comm_hash": "abc",
            "comm_index": 0, "time": 11.0, "calls": 1, "aborted": None, "entries": [entry]}))


@pytest.mark.parametrize("op, same", [("allreduce", True), ("gather", True),
                                      ("broadcast", False), ("alltoallv", False)])
def test_analyzer_compares_send_counts_where_every_rank_sends_the_same(tmp_path, op, same):
    """Every rank gives gather, like allgather, its send count (only the
    root's sendbuf matters to broadcast; alltoallv has a count per rank)."""
    from nccl import trace

    _records(tmp_path, op, [4, 5])
    (c,) = trace.analyze(trace.load(tmp_path))["communicators"]
    assert [m["field"] for m in c["mismatches"]] == (["count"] if same else []), c
    if same:
        assert "mismatched count at collective #1: rank 0: 4; rank 1: 5" in c["messages"]


SINGLE = r"""
import json, os, signal, sys, time
import numpy as np
import nccl.core as nc

comm = nc.Communicator.init(1, 0, nc.get_unique_id())
x = np.arange(6, dtype=np.float64)
comm.allreduce(x, x, nc.MAX)
comm.broadcast(x, x, 0)
try:
    comm.allreduce(x, np.zeros(2), nc.SUM)   # refused before the library: not recorded
except Exception:
    pass
comm.send(x, 0) if False else None
path = comm.dump_trace(sys.argv[1])
os.kill(os.getpid(), signal.SIGUSR1)
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(os.environ["NCCL4PY_TRACE_DIR"], "rank0.json")):
    assert time.monotonic() < deadline
    time.sleep(0.05)
print(json.dumps({"path": path}), flush=True)
comm.destroy()
"""


@needs_host
def test_dump_trace_and_sigusr1(tmp_path):
    tdir = tmp_path / "dir"
    out = tmp_path / "mine.json"
    p = subprocess.run([sys.executable, "-c", SINGLE, str(out)], capture_output=True, text=True,
                       env=host_env(NCCL4PY_TRACE_DIR=str(tdir)), timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["path"] == str(out)
    rec = json.loads(out.read_text())
    assert rec["reason"] == "request" and rec["rank"] == 0 and rec["nranks"] == 1
    e1, e2 = rec["entries"]
    assert (e1["seq"], e1["op"], e1["count"], e1["dtype"], e1["redop"], e1["root"]) == \
        (1, "allreduce", 6, "float64", "max", -1)
    assert (e2["seq"], e2["op"], e2["root"], e2["state"]) == (2, "broadcast", 0, "done")
    assert e1["enqueue"] <= e1["end"] <= e2["enqueue"] <= e2["end"]
    assert int(e1["sendbuf"], 16) != 0 and e1["sendbuf"] == e1["recvbuf"]
    # SIGUSR1 wrote the record into NCCL4PY_TRACE_DIR (and exit rewrote it)
    assert json.loads((tdir / "rank0.json").read_text())["reason"] in ("signal", "exit")


@needs_host
def test_trace_log_lines(tmp_path):
    log = tmp_path / "log.txt"
    code = ("import numpy as np, nccl.core as nc\n"
            "c = nc.Communicator.init(1, 0, nc.get_unique_id())\n"
            "x = np.ones(3, np.int32)\n"
            "c.allreduce(x, x, nc.SUM); c.reduce(x, x, nc.MIN, root=0); c.destroy()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=host_env(NCCL4PY_TRACE="1", NCCL4PY_TRACE_FILE=str(log)), timeout=120)
    assert p.returncode == 0, p.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("nccl4py trace: rank 0/1 #1 allreduce count=3 int32 sum "), lines
    assert lines[1].startswith("nccl4py trace: rank 0/1 #2 reduce count=3 int32 min root=0 ")
    assert all(line.endswith(" ok") for line in lines)


@pytest.mark.parametrize("var,value", [
    ("NCCL4PY_TRACE_BUFFER", "many"), ("NCCL4PY_TRACE_BUFFER", "-1"),
    ("NCCL4PY_TRACE_BUFFER", "10000001"), ("NCCL4PY_WATCHDOG_TIMEOUT", "-2"),
    ("NCCL4PY_WATCHDOG_TIMEOUT", "soon"), ("NCCL4PY_WATCHDOG_TIMEOUT", "nan"),
    ("NCCL4PY_TRACE", "yes"), ("NCCL4PY_TRACE_FILE", "/nonexistent-dir/x.log"),
])
@needs_host
def test_bad_environment_is_a_clear_error(var, value):
    code = ("import nccl.core as nc\n"
            "try:\n    nc.Communicator.init(1, 0, nc.get_unique_id())\n"
            "except ValueError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=host_env(**{var: value}), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"{var}={value} is invalid: expected"), p.stdout


def test_timeout_argument_is_checked():
    import nccl.core as nc

    c = nc.Communicator()
    with pytest.raises(ValueError, match="timeout must be from 0"):
        c._trace_setup(-1)
    with pytest.raises(TypeError, match="timeout must be a number"):
        c._trace_setup("1")


def test_timeout_error_pickles():
    import pickle

    from nccl.core import NcclTimeoutError
    from nccl.bindings import NCCLError

    e = NcclTimeoutError(8, "allreduce #5 did not complete", "allreduce", 5, 2.5)
    assert isinstance(e, NCCLError) and e.status == 8
    f = pickle.loads(pickle.dumps(e))
    assert (str(f), f.operation, f.seq, f.waited) == (str(e), "allreduce", 5, 2.5)


# ----------------------------------------- the abort of a blocked call

INTERRUPTED = r"""
import json, sys, threading, time
import numpy as np
import nccl.core as nc
from nccl import _errors

comms = nc.Communicator.init_all(2)   # one process; rank 1 never calls
x = np.ones(8, np.float32)
out = {}
if sys.argv[1] == "abort-while-raising":
    # Making the exception runs Python, which lets other threads run: one
    # that aborts the communicator now must not wait for the raising one.
    making = threading.Event()
    plain_init = _errors.NcclTimeoutError.__init__

    def slow_init(self, *args, **kwargs):
        making.set()
        time.sleep(0.5)   # the GIL is released: the other thread runs
        plain_init(self, *args, **kwargs)

    _errors.NcclTimeoutError.__init__ = slow_init

    def abort_now():
        making.wait()
        comms[0].abort()
        out["abort"] = "returned"

    th = threading.Thread(target=abort_now)
    th.start()
try:
    comms[0].allreduce(x, x, nc.SUM)   # blocked in the library until the watchdog aborts
except BaseException as e:
    ctx = e.__context__
    out.update(error=type(e).__name__, operation=getattr(e, "operation", None),
               seq=getattr(e, "seq", None), message=str(e), context=type(ctx).__name__,
               context_status=getattr(ctx, "status", None), context_message=str(ctx))
if sys.argv[1] == "abort-while-raising":
    th.join()
try:
    comms[0].allreduce(x, x, nc.SUM)
except BaseException as e:
    out["again"] = type(e).__name__
print(json.dumps(out), flush=True)
for c in comms:
    c.abort()
"""


@pytest.mark.parametrize("scenario", ["plain", "abort-while-raising"])
@needs_host
def test_a_blocked_call_the_watchdog_aborts_raises_timeout_error(scenario):
    """The call waiting in the library returns the library's error when the
    watchdog aborts the communicator: it raises NcclTimeoutError with that
    NCCLError as its context (on every Python: no call into Python with the
    library's exception pending), and a thread that aborts the communicator
    while the exception is being made does not deadlock with it."""
    p = subprocess.run([sys.executable, "-c", INTERRUPTED, scenario], capture_output=True,
                       text=True, env=host_env(NCCL4PY_WATCHDOG_TIMEOUT="1",
                                               NCCL4PY_HOST_TIMEOUT="300"), timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["error"] == "NcclTimeoutError", out
    assert (out["operation"], out["seq"]) == ("allreduce", 1), out
    assert "allreduce #1 did not complete within the watchdog timeout of 1 s" in out["message"]
    assert out["context"] == "NCCLError" and out["context_status"] == 5, out
    assert "aborted while ncclAllReduce waited" in out["context_message"], out
    assert out["again"] == "NcclTimeoutError", out  # also after abort() forgot it
    if scenario == "abort-while-raising":
        assert out["abort"] == "returned", out


# ------------------------------------------------------------ GPU path

GPU_WORKER = r"""
import ctypes, json, os, sys, time
import numpy as np
import nccl.core as nc
from nccl import _nccl

assert _nccl.library_family() == "rccl", _nccl.library_family()
stub = ctypes.CDLL(os.environ["NCCL_LIBRARY"])
hip = ctypes.CDLL(os.environ["NCCL4PY_GPU_RUNTIME"])
hip.gpuStubCallCount.argtypes = [ctypes.c_char_p]
stub.nccl4pyStubLastCall.restype = ctypes.c_char_p

class Dev:   # "device" memory of the stub runtime (host memory)
    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (a.ctypes.data, False), "version": 3}

x = Dev(np.ones(8, np.float32))
out = {}
comm = nc.Communicator(0x7F0012345000)
comm._trace_setup(float(sys.argv[2]), "gpu")
mode = sys.argv[1]
if mode == "async":
    stub.nccl4pyStubSetAsyncResult(6)   # remote error reported asynchronously
hip.gpuStubHoldEvents(1 if mode in ("hang", "async") else 0)
comm.allreduce(x, x, nc.SUM, stream=0x1234)        # returns at once: enqueued
out["records"] = hip.gpuStubCallCount(b"hipEventRecord")
time.sleep(float(sys.argv[2]) + 1.5)
out["queries"] = hip.gpuStubCallCount(b"hipEventQuery")
try:
    comm.allreduce(x, x, nc.SUM)
    out["second"] = "ok"
except Exception as e:
    out["second"] = type(e).__name__
    out["status"] = getattr(e, "status", None)
    out["message"] = str(e)
out["aborted"] = b"ncclCommAbort" in stub.nccl4pyStubLastCall()
path = comm.dump_trace(sys.argv[3])
out["entries"] = [(e["op"], e["state"], e["stream"]) for e in json.load(open(path))["entries"]]
print(json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def gpu_libs(tmp_path_factory):
    import gpu_stub

    d = tmp_path_factory.mktemp("gpu-watchdog")
    nccl_lib = build_stub("librccl.so", outdir=d / "lib")
    hip_lib = gpu_stub.build_stub(d)
    return nccl_lib, hip_lib


@pytest.mark.parametrize("mode", ["completes", "hang", "async"])
def test_gpu_path_events_async_errors_and_abort(tmp_path, gpu_libs, mode):
    nccl_lib, hip_lib = gpu_libs
    env = clean_env(NCCL_LIBRARY=str(nccl_lib), NCCL4PY_GPU_RUNTIME=str(hip_lib),
                    NCCL4PY_PLATFORM="rocm")
    p = subprocess.run([sys.executable, "-c", GPU_WORKER, mode, "0.5",
                        str(tmp_path / "r.json")], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["records"] >= 1 and out["queries"] >= 1, out
    first = out["entries"][0]
    assert first[0] == "allreduce" and int(first[2], 16) == 0x1234, out
    if mode == "completes":
        assert out["second"] == "ok" and not out["aborted"], out
        assert [s for _, s, _ in out["entries"]] in (["done", "done"], ["done", "enqueued"])
    else:
        assert out["second"] == "NcclTimeoutError" and out["aborted"], out
        assert first[1] == "aborted", out
        if mode == "hang":
            assert out["status"] == 8 and "allreduce #1 did not complete" in out["message"]
        else:
            assert out["status"] == 6 and "asynchronous error (status 6)" in out["message"]


@needs_host
def test_the_trace_numbers_point_to_point_calls_apart_and_notes_their_peer(tmp_path):
    out = tmp_path / "t.json"
    code = ("import sys, numpy as np, nccl.core as nc\n"
            "c = nc.Communicator.init(1, 0, nc.get_unique_id())\n"
            "x, y = np.ones(3, np.int32), np.zeros(3, np.int32)\n"
            "c.allreduce(x, x, nc.SUM)\n"
            "with nc.group():\n"
            "    c.send(x, 0); c.recv(y, 0)\n"
            "c.broadcast(x, x, root=0)\n"
            "c.dump_trace(sys.argv[1]); c.destroy()\n")
    p = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                       env=host_env(NCCL4PY_TRACE="1"), timeout=120)
    assert p.returncode == 0, p.stderr
    got = [(e["op"], e["kind"], e["seq"], e["redop"], e["root"], e["peer"])
           for e in json.loads(out.read_text())["entries"]]
    assert got == [("allreduce", "coll", 1, "sum", -1, -1), ("send", "p2p", 1, None, -1, 0),
                   ("recv", "p2p", 2, None, -1, 0), ("broadcast", "coll", 2, None, 0, -1)]
