"""Threads running the C core at once: the free-threaded build (GIL off).

On a free-threaded interpreter (3.13t and later) `import nccl` must leave
the GIL off, and every piece of shared state of the extension (the
per-type caches of buffer and stream resolution, the numpy.ndarray fast
path's learned type numbers, the slots of out-parameters, the
communicator's thread guard, the watchdog) must hold while threads call at
once.  Most tests run on a GIL build too (the same promises, fewer
interleavings); the import check needs a free-threaded build.  Each test
takes seconds; tests/test_threads.py has the multi-process thread tests.

The tests that call a communicator run as one rank of the host backend
(@pytest.mark.nccl: the test process itself runs on the recording stub).
The thread tests run under ThreadSanitizer too (tools/sanitize.sh thread,
docs/architecture.md).
"""
from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import threading
import time

import numpy as np
import pytest

import nccl.core as nc
from nccl import _nccl
from nccl._errors import NcclInvalid
from conftest import clean_env, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
needs_free_threading = pytest.mark.skipif(not FREE_THREADED,
                                          reason="needs a free-threaded build (3.13t+)")
NTHREADS = 8


class Sub(np.ndarray):
    """An ndarray subclass: the general path, the buffer protocol."""


class DLOnly:
    """Only __dlpack__ (and its device)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class AIOnly:
    """Only __array_interface__: a fresh dict every time."""

    def __init__(self, a):
        self.a = a

    @property
    def __array_interface__(self):
        return self.a.__array_interface__


class SharedAI:
    """Only __array_interface__, one dict every thread reads while others change it."""

    def __init__(self, a):
        self.d = dict(a.__array_interface__)
        self.a = a

    @property
    def __array_interface__(self):
        return self.d


def buffer_forms(a):
    """Every way of passing a's memory (a float32 array) as a buffer."""
    return [memoryview(a), a.view(Sub), DLOnly(a), AIOnly(a), a,
            (bytearray(a.tobytes()), nc.FLOAT32),  # a copy: read back from [5][0]
            (a, a.size, nc.FLOAT32)]


def run_threads(target, n=NTHREADS, args=()):
    """Run target(t, *args) in n threads started together; the errors they raised."""
    errors: list[str] = []
    start = threading.Barrier(n)

    def body(t):
        try:
            start.wait()
            target(t, *args)
        except BaseException as e:  # noqa: BLE001 - every failure is the test's
            errors.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


@pytest.fixture(autouse=True)
def gil_stays_off():
    """On a free-threaded build, nothing these tests import turns the GIL on."""
    yield
    if FREE_THREADED:
        assert not sys._is_gil_enabled()


# ------------------------------------------------------------------ import

IMPORTS = ("import sys, nccl, nccl.core, nccl.bindings, nccl.trace, nccl.testing, nccl._launch\n"
           "import nccl.core as nc\n"
           "c = nc.Communicator.init(1, 0, nc.get_unique_id()); c.destroy()\n"
           "print(sys._is_gil_enabled())\n")


@needs_free_threading
def test_import_keeps_the_gil_off():
    """`import nccl` (and a first call, which loads the library) leaves the
    GIL off and warns of nothing, with no PYTHON_GIL override."""
    p = subprocess.run([sys.executable, "-W", "error", "-c", IMPORTS],
                       env=clean_env(PYTHON_GIL=None), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False"]
    assert p.stderr == ""


# ------------------------------------------------------ buffers, own comms

@pytest.mark.nccl(nranks=1)
def test_every_buffer_form_in_eight_threads_each_with_its_own_communicator():
    """The issue's stress: with the GIL off, a one-entry type cache written by
    two separate stores gave another type's kind ('AI' object has no
    attribute '__dlpack__'). Every result is checked."""
    iters = 1500

    def work(t):
        comm = nc.Communicator.init(1, 0, nc.get_unique_id())
        try:
            for i in range(iters):
                src = np.full(16 + t, i + t, np.float32)
                dst = np.zeros_like(src)
                forms_src, forms_dst = buffer_forms(src), buffer_forms(dst)
                k = (i + t) % len(forms_src)
                comm.allreduce(forms_src[k], forms_dst[(k + 1) % len(forms_dst)], nc.SUM)
                got = dst if (k + 1) % len(forms_dst) != 5 else \
                    np.frombuffer(forms_dst[5][0], np.float32)
                if not (got == i + t).all():
                    raise AssertionError(f"iteration {i}, forms {k}: {got[:4]}")
        finally:
            comm.destroy()

    assert run_threads(work) == []


def test_resolution_caches_cleared_while_other_threads_read_them():
    """More types than the per-type caches hold (1024): they are cleared while
    other threads look them up (a borrowed entry must not be dropped under a
    reader), for buffers and streams alike."""
    a = np.arange(8, dtype=np.float32)
    want = _nccl.resolve_buffer(a, general=True)

    def work(t):
        for i in range(300):
            kind = type(f"AI{t}_{i}", (AIOnly,), {})
            got = _nccl.resolve_buffer(kind(a))
            if got != want:
                raise AssertionError(f"{got} != {want}")
            stream = type(f"S{t}_{i}", (), {"handle": 1000 + i})()
            if _nccl.resolve_stream(stream) != 1000 + i:
                raise AssertionError("stream")
            for o in buffer_forms(a):
                if _nccl.resolve_buffer(o)[1:3] != want[1:3]:
                    raise AssertionError(f"{type(o).__name__}")

    assert run_threads(work) == []


def test_interface_dict_changed_by_another_thread():
    """A producer whose one __array_interface__ dict another thread keeps
    changing: each resolution reads one consistent state of it (a copy) or
    refuses it cleanly, and never reads a dropped value."""
    a = np.arange(32, dtype=np.float32)
    b = np.arange(32, dtype=np.int32)
    obj = SharedAI(a)
    stop = threading.Event()
    states = [dict(a.__array_interface__), dict(b.__array_interface__)]

    def mutate():
        i = 0
        while not stop.is_set():
            for k, v in states[i % 2].items():
                obj.d[k] = v
            obj.d["typestr"] = str(obj.d["typestr"])  # a fresh str each time
            i += 1

    m = threading.Thread(target=mutate)
    m.start()
    try:
        def work(t):
            for _ in range(3000):
                try:
                    ptr, count, dtype = _nccl.resolve_buffer(obj)[:3]
                except (NcclInvalid, TypeError):
                    continue  # a mixed state may be refused, never misread
                if (ptr, count) not in ((a.ctypes.data, 32), (b.ctypes.data, 32)):
                    raise AssertionError((ptr, count, dtype))
        errors = run_threads(work, n=4)
    finally:
        stop.set()
        m.join()
    assert errors == []


def test_learned_type_numbers_from_many_threads_at_once():
    """The ndarray fast path learns a user-defined dtype's type number from
    the general path (n4p_ndarray_learn); threads learning at once, in a fresh
    process, all get the general path's answer."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    code = (
        "import threading, numpy as np, ml_dtypes\n"
        "from nccl import _nccl\n"
        "types = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float32]\n"
        "arrs = [np.zeros(8, t) for t in types]\n"
        "want = [_nccl.resolve_buffer(x, general=True) for x in arrs]\n"
        "bad, bar = [], threading.Barrier(8)\n"
        "def work(t):\n"
        "    bar.wait()\n"
        "    for i in range(2000):\n"
        "        k = (i + t) % len(arrs)\n"
        "        if _nccl.resolve_buffer(arrs[k]) != want[k]: bad.append(k)\n"
        "ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "info = _nccl._ndarray_fast_info()\n"
        "print(len(bad), info['on'], sorted(info['dtypes'].values()))\n")
    p = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    nbad, on, dtypes = p.stdout.split(" ", 2)
    assert nbad == "0" and on == "True"
    for d in (nc.BFLOAT16, nc.FLOAT8E4M3, nc.FLOAT8E5M2):
        assert int(d) in json.loads(dtypes)


# ------------------------------------------------------ one shared comm

@pytest.mark.nccl(nranks=1)
def test_threads_sharing_one_communicator_are_refused_not_corrupted():
    """Calls on one communicator must not overlap: a thread that finds
    another inside a call gets NcclInvalid 'in use by another thread'; every
    call that ran is right."""
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
    refused = [0] * NTHREADS

    def work(t):
        src = np.full(64, t, np.float32)
        for _ in range(500):
            dst = np.zeros_like(src)
            try:
                comm.allreduce(src, dst, nc.SUM)
            except NcclInvalid as e:
                if "in use by another thread" not in str(e):
                    raise
                refused[t] += 1
                continue
            if not (dst == t).all():
                raise AssertionError(dst[:4])

    try:
        assert run_threads(work) == []
    finally:
        comm.destroy()


# --------------------------------------- creation and destruction meanwhile

@pytest.mark.nccl(nranks=1)
def test_communicators_and_boxes_made_and_dropped_while_others_call():
    """Half the threads make and destroy communicators and PointerBoxes (their
    slots' addresses handed out, boxes given values) while the other half
    call on their own communicators; and destroy() from another thread while
    a thread calls is either refused or comes first (the call then says the
    communicator is not initialized), never a call on a destroyed handle."""
    import nccl.bindings as b

    def churn(t):
        for i in range(60):
            c = nc.Communicator.init(1, 0, nc.get_unique_id())
            box = b.PointerBox()
            box.ptr = i
            addr = box.address
            if box.ptr != i or addr == 0:
                raise AssertionError("box")
            x = np.ones(4, np.float32)
            c.allreduce(x, x, nc.SUM)
            c.destroy()
            del box

    def call(t):
        c = nc.Communicator.init(1, 0, nc.get_unique_id())
        x = np.arange(256, dtype=np.float32)
        y = np.empty_like(x)
        try:
            for _ in range(800):
                c.allreduce(x, y, nc.SUM)
                if not (y == x).all():
                    raise AssertionError("result")
        finally:
            c.destroy()

    assert run_threads(lambda t: (churn if t % 2 else call)(t)) == []


@pytest.mark.nccl(nranks=1)
def test_destroy_from_another_thread_races_the_calls():
    """One thread calls in a loop; another destroys the communicator at some
    moment: the destroy is refused while a call is inside, or it wins and
    every later call is NcclInvalid; nothing else."""
    for _ in range(20):
        comm = nc.Communicator.init(1, 0, nc.get_unique_id())
        x = np.ones(1024, np.float32)
        done = threading.Event()
        seen: list[str] = []

        def caller():
            while not done.is_set():
                try:
                    comm.allreduce(x, x, nc.SUM)
                except NcclInvalid as e:
                    seen.append(str(e))
                    if "not initialized" in str(e) or "destroyed" in str(e):
                        return

        def destroyer():
            for _ in range(200):  # with a GIL it mostly finds the caller inside
                try:
                    comm.destroy()
                    return True
                except NcclInvalid as e:
                    if "in use by another thread" not in str(e):
                        raise
                time.sleep(0)
            return False

        th = threading.Thread(target=caller)
        th.start()
        try:
            destroyed = destroyer()
        finally:
            done.set()
            th.join()
        if not destroyed:
            comm.destroy()
        for msg in seen:
            assert "not initialized" in msg or "destroyed" in msg or "in use" in msg, msg


# ------------------------------------------------------------------ groups

@pytest.mark.nccl(nranks=1)
def test_groups_from_many_threads():
    """group() counts depth per thread and keeps each thread's buffers alive
    to its own group end; eight threads in groups at once."""

    def work(t):
        comm = nc.Communicator.init(1, 0, nc.get_unique_id())
        try:
            for i in range(200):
                srcs = [np.full(8, i + t + k, np.float32) for k in range(3)]
                dsts = [np.zeros(8, np.float32) for _ in range(3)]
                with nc.group():
                    for s, d in zip(srcs, dsts):
                        comm.allreduce(AIOnly(s), d, nc.SUM)  # kept alive by the group
                    del srcs, s
                for k, d in enumerate(dsts):
                    if not (d == i + t + k).all():
                        raise AssertionError((i, k, d[:2]))
        finally:
            comm.destroy()

    assert run_threads(work) == []


# ---------------------------------------------------------------- watchdog

WATCHDOG = r"""
import json, sys, threading, time
import numpy as np
import nccl.core as nc
from nccl._errors import NcclTimeoutError

pairs, results = 2, {}
uids = [nc.get_unique_id() for _ in range(pairs)]
ready = threading.Barrier(2 * pairs + 2)
stop = threading.Event()

def rank(p, r):
    comm = nc.Communicator.init(2, r, uids[p], timeout=1.0)
    x = np.ones(64, np.float32)
    for _ in range(3):
        comm.allreduce(x, x, nc.SUM)
    ready.wait()
    if r == 1:                      # rank 1 never makes the fourth call
        stop.wait(); return
    t0 = time.monotonic()
    try:
        comm.allreduce(x, x, nc.SUM)
        results[p] = "returned"
    except NcclTimeoutError as e:
        results[p] = ["timeout", round(time.monotonic() - t0, 1)]
    except Exception as e:
        results[p] = repr(e)

busy_calls = [0, 0]
def busy(k):
    comm = nc.Communicator.init(1, 0, nc.get_unique_id())
    x = np.ones(64, np.float32)
    ready.wait()
    while not stop.is_set():
        comm.allreduce(x, x, nc.SUM)
        busy_calls[k] += 1
    comm.destroy()

ts = [threading.Thread(target=rank, args=(p, r)) for p in range(pairs) for r in (0, 1)]
ts += [threading.Thread(target=busy, args=(k,)) for k in range(2)]
for t in ts: t.start()
deadline = time.monotonic() + 60
while len(results) < pairs and time.monotonic() < deadline:
    time.sleep(0.05)
stop.set()
for t in ts: t.join()
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
print(json.dumps({"results": results, "busy": busy_calls, "gil": gil}))
"""


def test_watchdog_fires_during_calls_of_other_threads(tmp_path):
    """Two 2-rank communicators whose rank 1 stops calling: the watchdog (1 s)
    aborts each blocked rank-0 call (NcclTimeoutError) while two other
    threads keep calling on their own communicators."""
    p = subprocess.run([sys.executable, "-c", WATCHDOG], capture_output=True, text=True,
                       timeout=120, env=clean_env(NCCL4PY_TRACE_DIR=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    for p_, res in out["results"].items():
        assert res[0] == "timeout", (p_, res)
    assert len(out["results"]) == 2
    assert min(out["busy"]) > 0
    if FREE_THREADED:
        assert out["gil"] is False
