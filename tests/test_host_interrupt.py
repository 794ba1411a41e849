"""Ctrl-C on the host backend: a call blocked waiting for a peer raises
KeyboardInterrupt promptly (the timeout here is 300 s), the communicator is
left unusable, and the peers get an error instead of waiting for it."""
from __future__ import annotations

import os
import signal
import time

import pytest

from conftest import host_available, new_ids, shm_path
from hostproc import Rank, host_env, wait_for

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

# A margin that holds on a loaded 2-core machine; without the interrupt
# mechanism the call would wait for NCCL4PY_HOST_TIMEOUT (300 s).
PROMPT = 5.0

WORKER = r"""
import json, os, sys, time
import numpy as np
import nccl.core as nc
from nccl.bindings import NCCLError

def say(**kw):
    print(json.dumps(kw), flush=True)

rank, uid, flag = int(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3]
comm = nc.Communicator.init(2, rank, nc.UniqueId.from_bytes(uid))
x = np.ones(16, np.float32)
if rank == 0:
    say(event="calling")
    try:
        comm.allreduce(x, x, nc.SUM)
        say(event="returned")
    except KeyboardInterrupt:
        say(event="interrupted", t=time.monotonic())
    try:
        comm.allreduce(x, x, nc.SUM)
        say(event="reused")
    except NCCLError as e:
        say(event="refused", msg=str(e))
    comm.abort()
else:
    say(event="joined")
    while not os.path.exists(flag):      # rank 1 joins no collective until told
        time.sleep(0.02)
    t0 = time.monotonic()
    try:
        comm.allreduce(x, x, nc.SUM)
        say(event="returned")
    except NCCLError as e:
        say(event="error", waited=time.monotonic() - t0, msg=str(e))
    comm.destroy()
"""


def test_sigint_interrupts_a_blocked_collective_and_peers_fail(tmp_path):
    (uid,) = new_ids(1)
    flag = str(tmp_path / "go")
    env = host_env(NCCL4PY_HOST_TIMEOUT="300")
    ranks = [Rank(WORKER, str(r), uid, flag, env=env) for r in range(2)]
    try:
        assert ranks[1].event(120)["event"] == "joined"
        assert ranks[0].event(120)["event"] == "calling"
        time.sleep(1.0)                     # rank 0 is now asleep in the wait
        t_sig = time.monotonic()
        os.kill(ranks[0].proc.pid, signal.SIGINT)
        ev = ranks[0].event(60)
        assert ev["event"] == "interrupted", ev
        assert ev["t"] - t_sig < PROMPT, ev["t"] - t_sig
        ev = ranks[0].event(60)
        assert ev["event"] == "refused", ev
        assert "failed earlier" in ev["msg"], ev
        open(flag, "w").close()
        ev = ranks[1].event(60)
        assert ev["event"] == "error", ev
        assert ev["waited"] < PROMPT, ev
        assert "rank 0" in ev["msg"] and "interrupted" in ev["msg"], ev
        assert ranks[0].wait() == 0, ranks[0].stderr()
        assert ranks[1].wait() == 0, ranks[1].stderr()
    finally:
        for r in ranks:
            r.kill()


INIT_WORKER = r"""
import json, sys, time
import nccl.core as nc
print(json.dumps({"event": "calling"}), flush=True)
try:
    nc.Communicator.init(2, 0, nc.UniqueId.from_bytes(bytes.fromhex(sys.argv[1])))
    print(json.dumps({"event": "returned"}), flush=True)
except KeyboardInterrupt:
    print(json.dumps({"event": "interrupted", "t": time.monotonic()}), flush=True)
"""


def test_sigint_during_startup_interrupts_and_removes_the_segment():
    (uid,) = new_ids(1)
    path = shm_path(uid)
    r = Rank(INIT_WORKER, uid, env=host_env(NCCL4PY_HOST_TIMEOUT="300"))
    try:
        assert r.event(120)["event"] == "calling"
        wait_for(lambda: os.path.exists(path), 60, "the segment")
        time.sleep(0.5)
        t_sig = time.monotonic()
        os.kill(r.proc.pid, signal.SIGINT)
        ev = r.event(60)
        assert ev["event"] == "interrupted", ev
        assert ev["t"] - t_sig < PROMPT
        assert r.wait() == 0, r.stderr()
        assert not os.path.exists(path)
    finally:
        r.kill()
        if os.path.exists(path):
            os.unlink(path)


GROUP_WORKER = r"""
import json, os, sys, time
import numpy as np
import nccl.core as nc
rank, flag = int(sys.argv[1]), sys.argv[4]
comms = [nc.Communicator.init(2, rank, nc.UniqueId.from_bytes(bytes.fromhex(u)))
         for u in sys.argv[2:4]]
x, y = np.ones(16, np.float32), np.ones(16, np.float32)
if rank == 0:
    print(json.dumps({"event": "calling"}), flush=True)
    try:
        with nc.group():                 # the second communicator runs on a helper thread
            comms[0].allreduce(x, x, nc.SUM)
            comms[1].allreduce(y, y, nc.SUM)
        print(json.dumps({"event": "returned"}), flush=True)
    except KeyboardInterrupt:
        print(json.dumps({"event": "interrupted", "t": time.monotonic()}), flush=True)
    for c in comms:
        c.abort()
else:
    comms[0].allreduce(x, x, nc.SUM)     # the caller's own part completes...
    while not os.path.exists(flag):      # ...the helper thread's never does
        time.sleep(0.02)
    for c in comms:
        c.abort()
"""


def test_sigint_interrupts_a_group_of_several_communicators(tmp_path):
    uids = new_ids(2)
    flag = str(tmp_path / "go")
    env = host_env(NCCL4PY_HOST_TIMEOUT="300")
    ranks = [Rank(GROUP_WORKER, str(r), *uids, flag, env=env) for r in range(2)]
    try:
        assert ranks[0].event(120)["event"] == "calling"
        time.sleep(1.0)
        t_sig = time.monotonic()
        os.kill(ranks[0].proc.pid, signal.SIGINT)
        ev = ranks[0].event(60)
        assert ev["event"] == "interrupted", ev
        assert ev["t"] - t_sig < PROMPT
        open(flag, "w").close()
        assert ranks[0].wait() == 0, ranks[0].stderr()
        assert ranks[1].wait() == 0, ranks[1].stderr()
    finally:
        for r in ranks:
            r.kill()


LATE_WORKER = r"""
import json, os, signal, sys
import numpy as np
import nccl._nccl as _n
import nccl.core as nc

def say(**kw):
    print(json.dumps(kw), flush=True)

comm = nc.Communicator.init(1, 0, nc.UniqueId.from_bytes(bytes.fromhex(sys.argv[1])))
x = np.ones(16, np.float32)
ran = []

def at_group_end():
    # runs after the library's group end returned, before group_end() does:
    # a signal that arrives now is handled here, by Python, at once
    ran.append(1)
    os.kill(os.getpid(), signal.SIGINT)
    ran.append(2)

try:
    with nc.group():
        comm.send(x, 0)
        comm.recv(x, 0)
        assert _n._group_defer(at_group_end)
    say(event="returned", ran=len(ran))
    for _ in range(1000):                 # a signal still pending would be raised here
        pass
    say(event="not interrupted")
except KeyboardInterrupt:
    say(event="interrupted", ran=len(ran))
comm.destroy()
"""


def test_sigint_arriving_as_the_group_ends_is_not_lost():
    """A SIGINT handled between the library's return and the group end's (while
    the group end runs what it deferred) raises KeyboardInterrupt from the
    group end, instead of being written off as an unraisable exception."""
    (uid,) = new_ids(1)
    r = Rank(LATE_WORKER, uid, env=host_env(NCCL4PY_HOST_TIMEOUT="300"))
    try:
        ev = r.event(120)
        assert ev == {"event": "interrupted", "ran": 1}, (ev, r.stderr())
        assert r.wait() == 0, r.stderr()
    finally:
        r.kill()
