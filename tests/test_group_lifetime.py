"""Lifetimes inside groups.

Between group_start() and the outermost group_end() the library only queues
the calls; it reads and writes their buffers at group_end.  Every nccl.core
call made while a group is open therefore keeps its buffers and their exports
(DLPack managed tensors, Py_buffer views) alive until the outermost
group_end / group_simulate_end returns, on every path, errors included.  The
depth is counted where group_start/group_end run, so nccl.bindings'
group_start counts as well.

The same holds for what the library fills in at group_end: a window
registered inside a group is a RegisteredWindowHandle whose .handle is 0
until then, and a communicator made by split() inside a group stays alive
until its handle is written.  A communicator with operations queued in an
open group cannot be destroyed or finalized (NcclInvalid); an abort() is
carried out when that group ends.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest

import nccl.bindings as b
import nccl.core as nc
from conftest import build_stub, clean_env
from host_ranks import needs_host, run_ranks
from nccl._errors import NCCLError, NcclInvalid
from stub_comm import COMM, last_call
from dlpack_producers import CPU, Deleters, Producer

def refs(*objs) -> tuple[int, ...]:
    return tuple(sys.getrefcount(o) for o in objs)


# ------------------------------------------------- keep-alive, recording stub

def test_buffers_held_until_the_outermost_group_end(stub):
    comm = nc.Communicator(COMM)
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    base = refs(x, y)
    comm.allreduce(x, y, nc.SUM)
    assert refs(x, y) == base  # outside a group: released right after the call
    with nc.group():
        comm.allreduce(x, y, nc.SUM)
        held = refs(x, y)
        assert held[0] > base[0] and held[1] > base[1]
        with nc.group():
            comm.send(x, 1)
            comm.recv(y, 1)
        assert refs(x, y)[0] > held[0]  # an inner group_end releases nothing
    assert refs(x, y) == base


def allreduce_in_group(start):
    """(communicator on the stub, array, the array's reference counts before)
    after start() and an in-place allreduce of the array."""
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    base = refs(x)
    start()
    comm.allreduce(x, x, nc.SUM)
    return comm, x, base


def test_low_level_group_start_counts(stub):
    comm, x, base = allreduce_in_group(b.group_start)
    assert refs(x)[0] > base[0]
    b.group_end()
    assert refs(x) == base


def test_temporaries_live_until_group_end(stub):
    comm = nc.Communicator(COMM)
    with nc.group():
        t = np.arange(1000, dtype=np.float32) * 10
        alive = weakref.ref(t.base if t.base is not None else t)
        comm.send(t, 1)
        del t
        gc.collect()
        assert alive() is not None
    gc.collect()
    assert alive() is None


def test_exports_held_until_group_end(stub, lib):  # noqa: F811
    comm = nc.Communicator(COMM)
    d = Deleters(lib)
    with nc.group():
        comm.allreduce(Producer(lib, device=(CPU, 0)), Producer(lib, device=(CPU, 0)), nc.SUM)
        assert d.calls == 0  # the DLPack managed tensors are still owned
    assert d.calls == 2
    ba = bytearray(32)
    with nc.group():
        comm.send(ba, 1)
        with pytest.raises(BufferError):
            ba.extend(b"x")  # the Py_buffer export is still held
    ba.extend(b"x")


def test_released_when_group_end_fails(stub):
    comm, x, base = allreduce_in_group(nc.group_start)
    stub.nccl4pyStubSetResult(5)
    with pytest.raises(NCCLError):
        nc.group_end()
    stub.nccl4pyStubSetResult(0)
    assert refs(x) == base
    comm.allreduce(x, x, nc.SUM)  # the group is closed: no longer held
    assert refs(x) == base


def test_released_when_the_block_raises(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    base = refs(x)
    with pytest.raises(ValueError):
        with nc.group():
            comm.allreduce(x, x, nc.SUM)
            raise ValueError("user error inside the group")
    assert refs(x) == base


def test_released_when_a_call_inside_the_group_fails(stub):
    comm = nc.Communicator(COMM)
    x, y = np.ones(8, np.float32), np.zeros(8, np.int32)
    base = refs(x, y)
    with nc.group():
        with pytest.raises(NcclInvalid, match="Dtype mismatch"):
            comm.allreduce(x, y, nc.SUM)
        assert refs(x, y) == base  # nothing reached the library: nothing is held
        stub.nccl4pyStubSetResult(4)
        with pytest.raises(NCCLError):
            comm.allreduce(x, x, nc.SUM)
        stub.nccl4pyStubSetResult(0)
    assert refs(x, y) == base


@pytest.mark.parametrize("end", ["simulate_end", "end_simulate", "bindings"])
def test_released_at_group_simulate_end(stub, end):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    base = refs(x)
    nc.group_start()
    comm.allreduce(x, x, nc.SUM)
    if end == "simulate_end":
        nc.group_simulate_end()
    elif end == "end_simulate":
        nc.group_end(simulate=True)
    else:
        b.group_simulate_end()
    assert refs(x) == base


def test_python_level_calls_keep_their_buffers(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    base = refs(x)
    with nc.group():
        win = comm.register_window(np.zeros(16, np.uint8))
        comm.put_signal(x, 1, win)
        assert refs(x)[0] > base[0]
    assert refs(x) == base
    comm.close_all_resources()


# ------------------------------------------ destroy / finalize / abort in a group

def test_destroy_and_finalize_refused_while_ops_are_queued(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    with nc.group():
        comm.allreduce(x, x, nc.SUM)
        with pytest.raises(NcclInvalid, match="queued in an open group"):
            comm.destroy()
        with pytest.raises(NcclInvalid, match="queued in an open group"):
            comm.finalize()
        assert comm.is_valid
    assert last_call(stub) == "ncclGroupEnd"
    comm.finalize()
    assert last_call(stub) == "ncclCommFinalize"
    comm.destroy()
    assert last_call(stub) == "ncclCommDestroy" and not comm.is_valid


def test_abort_with_queued_ops_is_carried_out_at_group_end(stub):
    comm = nc.Communicator(COMM)
    x = np.ones(8, np.float32)
    with nc.group():
        comm.allreduce(x, x, nc.SUM)
        comm.abort()
        assert not comm.is_valid  # unusable at once ...
        with pytest.raises(NcclInvalid, match="not initialized"):
            comm.allreduce(x, x, nc.SUM)
        assert last_call(stub) == "ncclAllReduce"  # ... but not yet aborted
    assert last_call(stub) == "ncclCommAbort"
    assert f"comm=comm:{COMM:#x}" in stub.nccl4pyStubLastCall().decode()


# ------------------------------------------------------ deferred handles

DEFERRING_STUB = r"""
/* Like NCCL: a window registered inside a group gets its handle at group end. */
static int g_depth;
static ncclWindow_t *g_pending[64];
static int g_npending;
static unsigned long long g_next = 0x77000000ULL;
EXPORT unsigned long long nccl4pyStubLastFilled;
EXPORT unsigned long long nccl4pyStubLastDeregistered;
EXPORT long nccl4pyStubDeregistrations;
static void fill(ncclWindow_t *win)
{
    nccl4pyStubLastFilled = (g_next += 0x100);
    *win = (ncclWindow_t)(uintptr_t)nccl4pyStubLastFilled;
}
EXPORT ncclResult_t ncclGroupStart(void) { begin("ncclGroupStart"); g_depth++; return ncclSuccess; }
EXPORT ncclResult_t ncclGroupEnd(void)
{
    begin("ncclGroupEnd");
    if (g_depth == 0)
        return ncclInvalidUsage;
    if (--g_depth == 0) {
        for (int i = 0; i < g_npending; i++)
            fill(g_pending[i]);
        g_npending = 0;
    }
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                           ncclWindow_t *win, int winFlags)
{
    begin("ncclCommWindowRegister");
    (void)comm; (void)buff; (void)size; (void)winFlags;
    *win = NULL;
    if (g_depth > 0 && g_npending < 64)
        g_pending[g_npending++] = win;
    else
        fill(win);
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    begin("ncclCommWindowDeregister");
    (void)comm;
    nccl4pyStubLastDeregistered = (unsigned long long)(uintptr_t)win;
    nccl4pyStubDeregistrations++;
    return ncclSuccess;
}
"""

DEFERRED_WINDOW = r"""
import ctypes, gc, os
import numpy as np
import nccl.core as nc

lib = ctypes.CDLL(os.environ["NCCL_LIBRARY"])
filled = ctypes.c_ulonglong.in_dll(lib, "nccl4pyStubLastFilled")
dereg = ctypes.c_ulonglong.in_dll(lib, "nccl4pyStubLastDeregistered")
ndereg = ctypes.c_long.in_dll(lib, "nccl4pyStubDeregistrations")
comm = nc.Communicator(0x7F0012345000)
buf = np.zeros(256, np.uint8)
outside = comm.register_window(buf)
assert outside.handle == filled.value != 0
with nc.group():
    w = comm.register_window(buf)
    assert isinstance(w, nc.RegisteredWindowHandle), w
    assert w.handle == 0 and not w.is_valid
    comm.register_window(np.zeros(64, np.uint8))  # dropped: the communicator tracks it
    gc.collect()
assert w.handle != 0 and w.is_valid, w
h = w.handle
w.close()
assert (dereg.value, ndereg.value) == (h, 1)
with nc.group():
    late = comm.register_window(buf)
    late.close()                  # before the library has filled the handle
    assert not late.is_valid and ndereg.value == 1
assert (dereg.value, ndereg.value) == (filled.value, 2)  # deregistered at group end
comm.destroy()                    # the dropped one and `outside`
assert ndereg.value == 4, ndereg.value
print("OK")
"""


def test_window_registered_in_a_group_gets_its_handle_at_group_end(stub_dir):
    path = build_stub("libdeferring_stub.so", host_memory=True, extra_c=DEFERRING_STUB,
                      omit=("ncclGroupStart", "ncclGroupEnd", "ncclCommWindowRegister",
                            "ncclCommWindowDeregister"))
    p = subprocess.run([sys.executable, "-c", DEFERRED_WINDOW],
                       env=clean_env(NCCL_LIBRARY=str(path)), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "OK", p.stdout + p.stderr


# ------------------------------------------------------------ host backend

@needs_host
def test_grouped_send_of_temporaries_delivers_the_data(tmp_path):
    code = r"""
peer = 1 - RANK
n = 1 << 20                 # 4 MiB: a freed temporary is unmapped at once
x = np.arange(n, dtype=np.float32) + RANK
y = np.zeros(n, np.float32)
with nc.group():
    comm.send(x * 10, peer)
    comm.recv(y, peer)
small = np.zeros(1000, np.float32)
with nc.group():
    comm.send(np.full(1000, RANK + 1, np.float32) * 10, peer)
    junk = [np.full(1000, -1.0, np.float32) for _ in range(100)]  # reuse freed memory
    comm.recv(small, peer)
want = (np.arange(n, dtype=np.float32) + peer) * 10
report(big=bool(np.array_equal(y, want)), small=bool((small == (peer + 1) * 10).all()))
comm.destroy()
"""
    reports = run_ranks(tmp_path, code, 2)
    assert all(r["big"] and r["small"] for r in reports), reports


@needs_host
def test_grouped_allreduce_of_a_large_temporary(tmp_path):
    code = r"""
n = 1 << 22
out = np.zeros(n, np.float32)
with nc.group():
    comm.allreduce(np.full(n, RANK + 1, np.float32), out, nc.SUM)
report(ok=bool((out == 3).all()))
comm.destroy()
"""
    reports = run_ranks(tmp_path, code, 2)
    assert all(r["ok"] for r in reports), reports


@needs_host
def test_destroy_in_a_group_refused_then_group_completes(tmp_path):
    code = r"""
x = np.full(1024, RANK + 1, np.float32)
refused = ""
with nc.group():
    comm.allreduce(x, x, nc.SUM)
    try:
        comm.destroy()
    except nc.NcclInvalid as e:
        refused = str(e)
ok = bool((x == 3).all())
comm.destroy()
report(ok=ok, refused=refused)
"""
    reports = run_ranks(tmp_path, code, 2)
    assert all(r["ok"] and "queued in an open group" in r["refused"] for r in reports), reports


@needs_host
def test_split_in_a_group_is_filled_at_group_end(tmp_path):
    code = r"""
import gc, warnings
with nc.group():
    child = comm.split(0, RANK)
    comm.split(0, RANK)          # dropped inside the group: kept until group end
    gc.collect()
    inside = child.ptr
x = np.full(16, RANK + 1, np.float32)
child.allreduce(x, x, nc.SUM)
child.destroy()
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    gc.collect()
report(inside=inside, ok=bool((x == 3).all()))
comm.destroy()
"""
    reports = run_ranks(tmp_path, code, 2)
    assert all(r["ok"] and r["inside"] == 0 for r in reports), reports
