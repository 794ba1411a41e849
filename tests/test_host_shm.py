"""The host backend's shared-memory segments: nothing is left in /dev/shm
however a job ends, and a joining rank refuses a segment it cannot trust.

Each test makes its own unique ids and looks only at the segments they name
(other jobs may use /dev/shm at the same time)."""
from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import host_available, new_ids, shm_path
from hostproc import Rank, host_env, wait_for

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

INIT = r"""
import json, sys, time
import nccl.core as nc
from nccl.bindings import NCCLError
nranks, rank, uid = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
t0 = time.monotonic()
try:
    comm = nc.Communicator.init(nranks, rank, nc.UniqueId.from_bytes(uid))
    print(json.dumps({"ok": True}), flush=True)
    time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
    comm.destroy()
except NCCLError as e:
    print(json.dumps({"status": e.status, "msg": str(e), "waited": time.monotonic() - t0}),
          flush=True)
"""


def one_rank_comm() -> None:
    """Create (and destroy) a communicator in a fresh process."""
    (uid,) = new_ids(1)
    r = Rank(INIT, "1", "0", uid)
    assert r.event(120) == {"ok": True}
    assert r.wait() == 0, r.stderr()


def test_nranks_mismatch_fails_every_rank_at_once_and_leaves_nothing():
    (uid,) = new_ids(1)
    path = shm_path(uid)
    env = host_env(NCCL4PY_HOST_TIMEOUT="120")
    first = Rank(INIT, "2", "0", uid, env=env)
    try:
        wait_for(lambda: os.path.exists(path), 60, "the segment")
        wrong = Rank(INIT, "3", "1", uid, env=env)
        ev = wrong.event(60)
        assert ev.get("status") == 5 and "nranks" in ev["msg"], ev      # InvalidUsage
        assert wrong.wait() == 0
        assert not os.path.exists(path)          # removed by the failing rank
        ev = first.event(60)
        assert "status" in ev and "nranks" in ev["msg"], ev
        assert ev["waited"] < 30, ev             # not the 120 s timeout
        assert first.wait() == 0
    finally:
        first.kill()
        if os.path.exists(path):
            os.unlink(path)


def test_creator_killed_before_anyone_joined_is_collected():
    """SIGKILL cannot be caught: the name stays until the next communicator
    created on this machine finds every process of that segment gone."""
    (uid,) = new_ids(1)
    path = shm_path(uid)
    r = Rank(INIT, "2", "0", uid, env=host_env(NCCL4PY_HOST_TIMEOUT="300"))
    try:
        wait_for(lambda: os.path.exists(path), 60, "the segment")
        r.proc.send_signal(signal.SIGKILL)
        r.wait()
        assert os.path.exists(path)
        one_rank_comm()
        assert not os.path.exists(path)
    finally:
        r.kill()
        if os.path.exists(path):
            os.unlink(path)


EARLY_EXIT = r"""
import os, sys, time
uid = os.environ["NCCL4PY_UNIQUE_ID"]
if os.environ["NCCL4PY_RANK"] == "1":
    while not os.path.exists("/dev/shm/nccl4py-" + uid[16:48]):
        time.sleep(0.02)                         # rank 0 waits in creation now
    sys.exit(3)                                  # and this one never creates
import nccl.core as nc
print(uid, flush=True)
nc.Communicator.from_env()
"""


def test_rank_exiting_before_creation_leaves_nothing_after_the_launcher(tmp_path):
    """The launcher stops rank 0, which waits for rank 1 in creation, when
    rank 1 exits first; once it returns, rank 0's segment is gone too."""
    script = tmp_path / "early_exit.py"
    script.write_text(EARLY_EXIT)
    p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", "2", "--backend", "host",
                        "--timeout", "120", str(script)],
                       env=host_env(NCCL4PY_HOST_TIMEOUT="300"), capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 3, (p.stdout, p.stderr)
    path = shm_path(p.stdout.split()[0])
    try:
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_sigkill_at_any_step_leaves_nothing():
    """Jobs of 3 ranks are SIGKILLed at random moments of their life; after
    one more communicator is created, none of their segments remains."""
    rng = random.Random(1234)
    uids = new_ids(6)
    for uid in uids:
        ranks = [Rank(INIT, "3", str(r), uid, "5") for r in range(3)]
        time.sleep(rng.uniform(0, 1.5))
        for r in rng.sample(ranks, 3):           # every rank, in a random order
            r.proc.send_signal(signal.SIGKILL)
            time.sleep(rng.uniform(0, 0.1))
        for r in ranks:
            r.kill()
    one_rank_comm()
    left = [shm_path(u) for u in uids if os.path.exists(shm_path(u))]
    for p in left:
        os.unlink(p)
    assert left == []


def _planted(uid: str, mode: int, uid_owner: int | None = None) -> str:
    path = shm_path(uid)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    os.ftruncate(fd, 1 << 20)
    os.fchmod(fd, mode)
    if uid_owner is not None:
        os.fchown(fd, uid_owner, -1)
    os.close(fd)
    return path


def _joined_planted(uid: str) -> dict:
    r = Rank(INIT, "2", "1", uid, env=host_env(NCCL4PY_HOST_TIMEOUT="20"))
    try:
        ev = r.event(60)
        assert r.wait() == 0, r.stderr()         # no crash
        return ev
    finally:
        r.kill()


def test_segment_with_loose_permissions_is_refused():
    (uid,) = new_ids(1)
    path = _planted(uid, 0o644)
    try:
        ev = _joined_planted(uid)
        assert "status" in ev and "0644" in ev["msg"] and "0600" in ev["msg"], ev
        assert ev["waited"] < 10, ev
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644   # not ours: left alone
    finally:
        os.unlink(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_segment_of_another_user_is_refused():
    (uid,) = new_ids(1)
    path = _planted(uid, 0o600, uid_owner=65534)
    try:
        ev = _joined_planted(uid)
        assert "status" in ev and "owned by uid 65534" in ev["msg"], ev
    finally:
        os.unlink(path)


def test_segment_that_is_not_a_segment_is_refused():
    (uid,) = new_ids(1)
    path = _planted(uid, 0o600)               # right owner and mode, zero bytes inside
    try:
        ev = _joined_planted(uid)
        assert "status" in ev and "not a valid" in ev["msg"], ev
        assert ev["waited"] < 10, ev
    finally:
        os.unlink(path)
