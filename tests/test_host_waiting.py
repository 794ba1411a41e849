"""A rank blocked on the host backend sleeps: it uses little CPU however long
it waits, so ranks can outnumber cores."""
from __future__ import annotations

import pytest

from conftest import host_available, new_ids
from hostproc import Rank, host_env

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WAIT = 3.0

WORKER = r"""
import json, sys, time
import numpy as np
import nccl.core as nc
rank, uid, kind, wait = int(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3], float(sys.argv[4])
comm = nc.Communicator.init(2, rank, nc.UniqueId.from_bytes(uid))
x = np.ones(1000, np.float32)
comm.allreduce(x, x, nc.SUM)
if rank == 1:
    time.sleep(wait)
c0 = time.process_time()
t0 = time.monotonic()
if kind == "recv":
    if rank == 0:
        comm.recv(x, 1)
    else:
        comm.send(x, 0)
else:
    comm.allreduce(x, x, nc.SUM)
print(json.dumps({"cpu": time.process_time() - c0, "wall": time.monotonic() - t0}), flush=True)
comm.destroy()
"""


@pytest.mark.parametrize("kind", ["recv", "allreduce"])
def test_a_waiting_rank_sleeps(kind):
    (uid,) = new_ids(1)
    env = host_env(NCCL4PY_HOST_TIMEOUT="120")
    ranks = [Rank(WORKER, str(r), uid, kind, str(WAIT), env=env) for r in range(2)]
    try:
        res = ranks[0].event(120)
        for r in ranks:
            assert r.wait() == 0, r.stderr()
    finally:
        for r in ranks:
            r.kill()
    assert res["wall"] > WAIT / 2, res           # it did wait
    assert res["cpu"] < 0.05 * res["wall"], res  # ...asleep (under 5 % of a core)
