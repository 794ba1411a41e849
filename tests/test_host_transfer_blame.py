"""Whose memory a failed single-copy transfer hit is decided by the ranks, not
by a clock: a rank whose read of a peer's buffer fails (its own memory being
fine) waits until that peer has reported its own failure, has finished its
transfers, or is waiting the same way.  Two ranks whose reads fail on each
other's buffers therefore both fail at once, blaming each other's buffer,
instead of waiting for each other until NCCL4PY_HOST_TIMEOUT."""
from __future__ import annotations

import pytest

from conftest import host_available, new_ids
from hostproc import Rank, host_env

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WORKER = r"""
import ctypes, json, mmap, sys, time
import numpy as np
import nccl.core as nc
from nccl.bindings import NCCLError

rank, uid = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
comm = nc.Communicator.init(2, rank, nc.UniqueId.from_bytes(uid))
n = 1 << 14                                     # 64 KiB blocks: single copy
blk = 4 * n
region = mmap.mmap(-1, 2 * blk)                 # page-aligned, read-write
addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
# this rank's own block (its send buffer, in place) cannot be read by the peer;
# the block it reads into is fine
assert libc.mprotect(addr + rank * blk, blk, 0) == 0
y = np.ctypeslib.as_array((ctypes.c_float * (2 * n)).from_address(addr))
t0 = time.monotonic()
try:
    comm.allgather(y[rank * n:(rank + 1) * n], y)
    out = {"event": "ok"}
except NCCLError as e:
    out = {"event": "error", "status": e.status, "msg": str(e)}
out["t"] = time.monotonic() - t0
print(json.dumps(out), flush=True)
assert libc.mprotect(addr + rank * blk, blk, 3) == 0
comm.abort()
"""


def test_ranks_whose_reads_fail_on_each_others_buffers_fail_at_once():
    (uid,) = new_ids(1)
    env = host_env(NCCL4PY_HOST_TIMEOUT="120", NCCL4PY_HOST_SINGLE_COPY="1")
    ranks = [Rank(WORKER, str(r), uid, env=env) for r in range(2)]
    try:
        for r, rank in enumerate(ranks):
            ev = rank.event(100)
            assert ev["event"] == "error", ev
            assert ev["t"] < 30, ev           # not NCCL4PY_HOST_TIMEOUT
            assert f"rank {1 - r}" in ev["msg"], ev
            assert "Bad address" in ev["msg"], ev
        for rank in ranks:
            assert rank.wait(60) == 0, rank.err
    finally:
        for rank in ranks:
            if rank.proc.poll() is None:
                rank.proc.kill()
