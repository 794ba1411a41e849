"""Memory and communicators that are dropped, freed or exported.

- mem_alloc memory stays alive while views exported from it (DLPack, the
  buffer protocol) exist, even after mem_free(); it is freed when the last
  of them goes, and a dropped buffer is freed on garbage collection.
- A communicator that nccl.core created and that is dropped without
  destroy() is released on garbage collection with a ResourceWarning (by
  abort: a finalizer must never block on peers).  The parent does not keep
  its split children alive.  Communicator(ptr) only wraps a handle it does
  not own, and never releases it.
"""
from __future__ import annotations

import gc
import os
import warnings

import nccl.core as nc
from conftest import clean_env, run_python
from host_ranks import needs_host, run_ranks

pytestmark = needs_host

RSS = r"""
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
def vmsize():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
"""


def host_python(code: str) -> str:
    p = run_python(code, clean_env(NCCL4PY_BACKEND="host"), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_mem_free_keeps_memory_alive_while_views_exist():
    out = host_python(r"""
import gc
import numpy as np
import nccl.core as nc

buf = nc.mem_alloc(1 << 20)
view = np.from_dlpack(buf)
view[:] = 7
mv = buf.memoryview()
nc.mem_free(buf)
assert "freed" in repr(buf)
gc.collect()
others = [nc.mem_alloc(1 << 20) for _ in range(8)]   # would reuse the freed block
for o in others:
    np.from_dlpack(o)[:] = 1
assert (view == 7).all() and mv[12345] == 7
view[:] = 9                                           # still writable, still ours
assert mv[0] == 9
print("OK")
""")
    assert out.strip() == "OK"


def test_dropped_mem_alloc_buffers_are_freed():
    out = host_python(RSS + r"""
import gc
import numpy as np
import nccl.bindings as b
import nccl.core as nc

freed = []
real_free = b.mem_free
b.mem_free = lambda ptr: (freed.append(ptr), real_free(ptr))[1]   # count the frees

def churn(n):
    for _ in range(n):
        buf = nc.mem_alloc(1 << 20)
        np.from_dlpack(buf)[:] = 1          # touch every page
        del buf
churn(20)
gc.collect()
before = rss()
churn(200)
gc.collect()
grew = rss() - before
# a view alive past the buffer keeps it, and frees it when it goes
buf = nc.mem_alloc(1 << 20)
v = np.from_dlpack(buf)
v[:] = 1
del buf
gc.collect()
kept = len(freed)
del v
gc.collect()
print(grew, kept, len(freed))
""")
    grew, kept, total = map(int, out.split())
    assert (kept, total) == (220, 221), "a dropped buffer was not freed, or freed under a view"
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine holds freed memory
        assert grew < 50 << 20, f"200 dropped 1 MiB buffers grew RSS by {grew >> 20} MiB"


def test_unowned_wrapper_is_never_released(recording_stub):
    recording_stub.nccl4pyStubReset()
    comm = nc.Communicator(0x7F00_1234_5000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del comm
        gc.collect()
    assert b"ncclComm" not in recording_stub.nccl4pyStubLastCall()


def test_dropped_communicators_released_on_gc(tmp_path):
    code = RSS + r"""
import gc, warnings, weakref
w = []
with warnings.catch_warnings():
    warnings.simplefilter("always")
    # recorded without the warning's source (which would keep the communicator)
    warnings.showwarning = lambda message, category, *args, **kw: w.append(
        str(message)) if issubclass(category, ResourceWarning) else None
    for _ in range(5):
        comm.split(0, RANK).allreduce(np.ones(4, np.float32), np.zeros(4, np.float32), nc.SUM)
    gc.collect()
    before = vmsize()
    refs = []
    for _ in range(60):
        child = comm.split(0, RANK)
        refs.append(weakref.ref(child))
        del child
    gc.collect()
    grew = vmsize() - before
    alive = sum(r() is not None for r in refs)
report(grew=grew, alive=alive, warnings=len(w), sample=w[:1])
comm.destroy()
"""
    reports = run_ranks(tmp_path, code, 2)
    for r in reports:
        assert r["alive"] == 0, r              # the parent keeps no child alive
        assert r["warnings"] == 65, r          # one ResourceWarning per dropped communicator
        assert "Communicator" in r["sample"][0], r
        assert r["grew"] < 256 << 20, r        # 60 children mapped ~1.3 GiB before


def test_gc_of_a_communicator_does_not_wait_for_peers(tmp_path):
    code = r"""
import gc, time, warnings
from nccl.bindings import NCCLError
child = comm.split(0, RANK)
if RANK == 0:
    time.sleep(1.0)                     # rank 1 is blocked in the all-reduce by now
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del child
        gc.collect()
    report(gc_seconds=time.monotonic() - t0, peer_error=None)
else:
    try:
        child.allreduce(np.ones(4, np.float32), np.zeros(4, np.float32), nc.SUM)
        err = None
    except NCCLError as e:
        err = type(e).__name__
    child.abort()
    report(gc_seconds=0, peer_error=err)
comm.destroy()
"""
    r0, r1 = run_ranks(tmp_path, code, 2, NCCL4PY_HOST_TIMEOUT="8")
    assert r1["peer_error"] == "NCCLError", r1
    assert r0["gc_seconds"] < 6, r0   # aborted, not waiting for the peer's time-out (8 s)
