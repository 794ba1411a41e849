"""A call that failed on one rank does not succeed on another: when rank 0's
watchdog aborts a call it is blocked in (its arrival, its data or its send
already published), rank 1, arriving at the same call after the abort, fails
too, with a message naming rank 0 and the abort, for collectives whatever the
root and for grouped sends and receives."""
from __future__ import annotations

import os

import pytest

from conftest import host_available, new_ids
from hostproc import Rank, host_env

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WATCHDOG = 2.0

WORKER = r"""
import json, os, sys, time
import numpy as np
import nccl.core as nc

def say(**kw):
    print(json.dumps(kw), flush=True)

scenario, rank, uid, flag = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
timeout = float(sys.argv[5]) if rank == 0 else None   # only rank 0 has a watchdog
comm = nc.Communicator.init(2, rank, nc.UniqueId.from_bytes(uid), timeout=timeout)
x = np.full(64, rank + 1, np.float32)
y = np.zeros(64, np.float32)
comm.allreduce(x, y, nc.SUM)                          # both ranks are up
say(event="ready")
if rank == 1:
    while not os.path.exists(flag):                   # arrive after rank 0's abort
        time.sleep(0.02)
try:
    if scenario == "allreduce":
        comm.allreduce(x, y, nc.SUM)
    elif scenario == "broadcast":                     # rank 1, the root, waits for nobody
        comm.broadcast(x, y, 1)
    else:
        with nc.group():
            comm.send(x, 1 - rank)
            comm.recv(y, 1 - rank)
    say(event="ok")
except Exception as e:
    say(event="error", type=type(e).__name__, msg=str(e))
comm.abort()
"""


@pytest.mark.parametrize("scenario", ["allreduce", "broadcast", "sendrecv"])
def test_a_rank_arriving_after_its_peer_aborted_fails_naming_the_abort(tmp_path, scenario):
    (uid,) = new_ids(1)
    flag = str(tmp_path / "go")
    env = host_env(NCCL4PY_HOST_TIMEOUT="300")
    ranks = [Rank(WORKER, scenario, str(r), uid, flag, str(WATCHDOG), env=env)
             for r in range(2)]
    try:
        for r in ranks:
            assert r.event(120)["event"] == "ready"
        first = ranks[0].event(120)                   # the watchdog aborted rank 0's call
        assert first["event"] == "error", first
        assert first["type"] in ("NcclTimeoutError", "NCCLError") and "abort" in first["msg"], first
        open(flag, "w").close()
        late = ranks[1].event(120)
        assert late["event"] == "error", (scenario, late)
        assert late["type"] == "NCCLError", late
        assert "rank 0" in late["msg"] and "aborted" in late["msg"], late
        for r in ranks:
            assert r.wait(60) == 0, r.err
    finally:
        for r in ranks:
            if r.proc.poll() is None:
                r.proc.kill()
        if os.path.exists(flag):
            os.unlink(flag)
