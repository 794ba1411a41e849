"""A /dev/shm too small for a job: the host backend reserves a segment's memory
before it touches it, so a shortage is an NCCLError (SystemError) on the rank
that needed the memory, naming /dev/shm, the bytes needed and the bytes free,
at creation or when a point-to-point ring is first used, and never a SIGBUS.

Each test runs a 2-rank job (``python -m nccl.run``) in a private mount
namespace whose /dev/shm is a small tmpfs (``unshare -m`` as root, or
``unshare -r -m`` in an unprivileged user namespace); nothing outside the
test sees it.  Skipped where neither is allowed."""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, host_available

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

SYSTEM_ERROR = 2

PRELUDE = r"""
import json, sys
import numpy as np
import nccl.core as nc
from nccl.bindings import NCCLError

def report(**kw):
    print(json.dumps(kw), flush=True)

try:
    comm = nc.Communicator.from_env()
except NCCLError as e:
    report(stage="init", status=e.status, msg=str(e))
    sys.exit(0)
RANK = comm.rank
"""


@functools.lru_cache(maxsize=None)
def _unshare() -> tuple[str, ...] | None:
    """The unshare command that lets a child mount its own /dev/shm, or None."""
    exe = shutil.which("unshare")
    if exe is None:
        return None
    for opts in (("-m",), ("-r", "-m")):
        probe = [exe, *opts, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"]
        try:
            if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
                return (exe, *opts)
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def run_small_shm(tmp_path: Path, size: str, code: str, **env: str) -> list[dict]:
    """Run `code` (after PRELUDE) as 2 ranks with a /dev/shm of `size`; the
    launcher must exit 0 (no rank killed); returns the reports by rank."""
    unshare = _unshare()
    if unshare is None:
        pytest.skip("cannot mount a private tmpfs on /dev/shm here (unshare -m needs root, "
                    "unshare -r -m unprivileged user namespaces)")
    script = tmp_path / "rank_script.py"
    script.write_text(PRELUDE + code)
    cmd = [*unshare, "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"',
           "sh", sys.executable, "-m", "nccl.run", "-n", "2", "--backend", "host",
           "--timeout", "120", str(script)]
    p = subprocess.run(cmd, env=clean_env(NCCL4PY_HOST_TIMEOUT="60", **env),
                       capture_output=True, text=True, timeout=180)
    out = f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert p.returncode == 0, out  # 135 would be a rank killed by SIGBUS
    reports = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 2, out
    return reports


def shortage(msg: str) -> tuple[int, int]:
    """(bytes needed, bytes free) from a shortage message."""
    m = re.search(r"cannot reserve (\d+) bytes of shared memory in /dev/shm .*?(\d+) bytes free",
                  msg)
    assert m, msg
    return int(m.group(1)), int(m.group(2))


ALLREDUCE = r"""
x = np.full(1 << 18, RANK + 1, np.float32)
y = np.empty_like(x)
try:
    comm.allreduce(x, y, nc.SUM)
    report(stage="done", rank=RANK, ok=bool((y == 3).all()))
except NCCLError as e:
    report(stage="coll", rank=RANK, status=e.status, msg=str(e))
comm.destroy()
"""


def test_too_small_at_creation_is_an_error_naming_the_bytes(tmp_path):
    # 2 ranks need about 3.2 MiB (staging slots, eager entries, control blocks)
    for r in run_small_shm(tmp_path, "1m", ALLREDUCE):
        assert r["stage"] == "init" and r["status"] == SYSTEM_ERROR, r
        need, free = shortage(r["msg"])
        assert need > free and free <= 1 << 20, r
        assert "for a segment of 2 ranks" in r["msg"], r


def test_small_but_sufficient_shm_runs(tmp_path):
    for r in run_small_shm(tmp_path, "8m", ALLREDUCE):
        assert r == {"stage": "done", "rank": r["rank"], "ok": True}, r


SEND = r"""
n = 4 << 20
try:
    if RANK == 0:
        comm.send(np.ones(n, np.float32), 1)
    else:
        y = np.zeros(n, np.float32)
        comm.recv(y, 0)
        assert (y == 1).all()
    report(stage="done", rank=RANK)
except NCCLError as e:
    report(stage="p2p", rank=RANK, status=e.status, msg=str(e))
comm.destroy()
"""


def test_a_ring_that_does_not_fit_fails_its_sender_and_names_it(tmp_path):
    """The communicator fits; the first send needs its 64 MiB ring, which does
    not: the sender says so, the receiver fails at once naming the sender."""
    reports = {r["rank"]: r for r in run_small_shm(tmp_path, "16m", SEND,
                                                   NCCL4PY_HOST_RING_BYTES="64M")}
    sender, receiver = reports[0], reports[1]
    assert sender["stage"] == "p2p" and sender["status"] == SYSTEM_ERROR, sender
    assert "rank 0 of 2: ncclSend" in sender["msg"] and "the ring to rank 1" in sender["msg"]
    need, free = shortage(sender["msg"])
    assert need == 64 << 20 and free < need, sender
    assert receiver["stage"] == "p2p" and "because rank 0 reported an error" in receiver["msg"]
    assert "/dev/shm" in receiver["msg"], receiver


MEMMAP = r"""
n = 1 << 20
x = np.full(n, RANK + 1, np.float32)
if RANK == 1:  # a receive buffer on the (nearly full) /dev/shm itself
    y = np.memmap("/dev/shm/receive-buffer", dtype=np.float32, mode="w+", shape=(2 * n,))
else:
    y = np.zeros(2 * n, np.float32)
try:
    comm.allgather(x, y)
    report(stage="done", rank=RANK)
except NCCLError as e:
    report(stage="coll", rank=RANK, status=e.status, msg=str(e))
comm.destroy()
"""


def test_a_fault_in_the_own_buffer_is_blamed_on_the_own_rank(tmp_path):
    """Rank 1 reads rank 0's block straight into a buffer whose pages cannot
    be had: the error is rank 1's (its own memory), not rank 0's buffer."""
    reports = {r["rank"]: r for r in run_small_shm(tmp_path, "8m", MEMMAP,
                                                   NCCL4PY_HOST_SINGLE_COPY="1")}
    mine = reports[1]
    assert mine["stage"] == "coll" and mine["status"] == SYSTEM_ERROR, mine
    assert "rank 1 of 2: ncclAllGather: this rank's own memory" in mine["msg"], mine
    assert "reading from rank 0" in mine["msg"], mine
    assert "because rank 1 reported an error" in reports[0]["msg"], reports[0]
