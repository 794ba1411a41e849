"""Fault injection on the host backend.

Three ranks (separate processes) share a communicator; one of them
misbehaves: it is SIGKILLed during a collective, during single-copy collectives whose
buffers its peers read or (a broadcast's receiver) write, inside a group, or during communicator creation; it never arrives at a collective; or it calls a
different collective than the others.  For each case the survivors must get
an NCCLError within the timeout (NCCL4PY_HOST_TIMEOUT=3), abort/destroy must
return, no /dev/shm segment of these communicators may remain, and a new
communicator among the same surviving processes must work.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import clean_env, host_available, new_ids, shm_path

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

TIMEOUT = 3.0
REMOTE, INVALID_USAGE, TIMEOUT_STATUS = 6, 5, 8

WORKER = r"""
import json, os, signal, sys, time
import numpy as np
import nccl.bindings as b

scenario, rank, nranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
uid1, uid2 = bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])
victim = nranks - 1
F32, SUM = int(b.DataType.Float32), int(b.RedOp.Sum)
out = {"rank": rank}

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def allreduce(comm, x):
    b.all_reduce(x.ctypes.data, x.ctypes.data, x.size, F32, SUM, comm, 0)

x = np.ones(1 << 16, np.float32)
comm = None
t0 = time.monotonic()
try:
    if scenario == "kill_init" and rank == victim:
        # attached to the segment but the join is still pending in the group
        b.group_start()
        box = b.PointerBox()
        b.comm_init_rank(box.address, nranks, uid1, rank)
        die()
    comm = b.comm_init_rank(nranks, uid1, rank)
    for i in range(4):
        allreduce(comm, x)                 # a few good rounds first
    t0 = time.monotonic()
    if scenario == "kill_collective":
        if rank == victim:
            die()
        for i in range(100):
            allreduce(comm, x)
    elif scenario == "kill_group":
        peer = (rank + 1) % nranks
        src = (rank - 1) % nranks
        y = np.zeros_like(x)
        b.group_start()
        allreduce(comm, x)
        b.send(x.ctypes.data, x.size, F32, peer, comm, 0)
        b.recv(y.ctypes.data, y.size, F32, src, comm, 0)
        if rank == victim:
            die()
        b.group_end()
    elif scenario == "kill_single_copy":
        # large all-to-alls read straight from the peers' buffers
        # (NCCL4PY_HOST_SINGLE_COPY=1); the victim dies in the middle
        big = np.ones(3 << 20, np.float32)
        res = np.empty_like(big)
        if rank == victim:
            import threading
            threading.Timer(0.05, die).start()
        for i in range(1000):
            b.allto_all(big.ctypes.data, res.ctypes.data, big.size // nranks, F32, comm, 0)
    elif scenario == "kill_single_copy_broadcast":
        # the root writes part of a large broadcast into the receivers'
        # buffers; the victim, a receiver, dies in the middle
        big = np.ones(3 << 20, np.float32)
        if rank == victim:
            import threading
            threading.Timer(0.05, die).start()
        for i in range(1000):
            b.broadcast(big.ctypes.data, big.ctypes.data, big.size, F32, 0, comm, 0)
    elif scenario == "kill_single_copy_allreduce":
        # large in-place all-reduces read the peers' inputs and results;
        # the victim dies in the middle
        big = np.ones(3 << 20, np.float32)
        if rank == victim:
            import threading
            threading.Timer(0.05, die).start()
        for i in range(1000):
            allreduce(comm, big)
    elif scenario == "never_arrives":
        if rank == victim:
            time.sleep(120)                # killed by the test
        allreduce(comm, x)
    elif scenario == "mismatch":
        if rank == victim:
            b.broadcast(x.ctypes.data, x.ctypes.data, x.size, F32, 0, comm, 0)
        else:
            allreduce(comm, x)
    out["error"] = None
except b.NCCLError as e:
    out["error"] = [e.status, str(e)]
out["waited"] = time.monotonic() - t0
if comm is not None:
    t1 = time.monotonic()
    (b.comm_abort if out["error"] else b.comm_destroy)(comm)
    out["teardown"] = time.monotonic() - t1
# the next communicator, among the processes still alive
alive = nranks if scenario == "mismatch" else nranks - 1
if rank < alive:
    # what is timed is the failure above; the survivors may reach the next
    # communicator seconds apart on a busy machine
    os.environ["NCCL4PY_HOST_TIMEOUT"] = "60"
    c2 = b.comm_init_rank(alive, uid2, rank)
    y = np.full(1000, rank + 1, np.float32)
    allreduce(c2, y)
    out["next_ok"] = bool((y == alive * (alive + 1) / 2).all())
    b.comm_destroy(c2)
print(json.dumps(out), flush=True)
"""


def host_env(**kw):
    return clean_env(NCCL4PY_BACKEND="host", NCCL4PY_HOST_TIMEOUT=str(TIMEOUT), **kw)




EXPECT = {  # scenario -> statuses the survivors may see
    "kill_collective": {REMOTE, TIMEOUT_STATUS},
    "kill_group": {REMOTE, TIMEOUT_STATUS},
    "kill_init": {REMOTE, TIMEOUT_STATUS},
    "kill_single_copy": {REMOTE, TIMEOUT_STATUS},
    "kill_single_copy_broadcast": {REMOTE, TIMEOUT_STATUS},
    "kill_single_copy_allreduce": {REMOTE, TIMEOUT_STATUS},
    "never_arrives": {TIMEOUT_STATUS, REMOTE},
    "mismatch": {INVALID_USAGE},
}


@pytest.mark.parametrize("scenario", sorted(EXPECT))
def test_survivors_get_an_error_and_recover(scenario):
    nranks = 3
    uid1, uid2 = new_ids(2)
    env = host_env(NCCL4PY_HOST_SINGLE_COPY="1" if scenario.startswith("kill_single_copy")
                   else None)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, scenario, str(r), str(nranks), uid1,
                               uid2], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(nranks)]
    victim = procs[-1]
    t0 = time.monotonic()
    try:
        survivors = procs if scenario == "mismatch" else procs[:-1]
        outs = [p.communicate(timeout=60) for p in survivors]
    finally:
        if scenario == "never_arrives":
            victim.kill()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    elapsed = time.monotonic() - t0
    if scenario.startswith("kill_"):
        assert victim.returncode == -signal.SIGKILL, victim.stderr
    results = []
    for p, (so, se) in zip(survivors, outs):
        assert p.returncode == 0, f"rank exit {p.returncode}\n{so}\n{se}"
        results.append(json.loads(so.strip().splitlines()[-1]))
    for res in results:
        assert res["error"] is not None, res
        status, msg = res["error"]
        assert status in EXPECT[scenario], res
        assert "[last error: " in msg, res
        assert res["waited"] < TIMEOUT + 3, res          # an error within the timeout
        assert res.get("teardown", 0) < 2, res           # abort/destroy return
        if "next_ok" in res or scenario != "mismatch":
            assert res["next_ok"] is True, res           # the next communicator works
    assert elapsed < 40
    time.sleep(0.2)
    for hexid in (uid1, uid2):
        assert not os.path.exists(shm_path(hexid)), shm_path(hexid)
