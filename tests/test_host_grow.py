"""Communicator.get_unique_id() and grow() on the host backend (ncclCommGetUniqueId,
ncclCommGrow, NCCL 2.29+ semantics): the existing ranks of a communicator and new
ranks, which get the coordinator's id out of band, form one larger communicator in
which the existing ranks keep their ranks.

The existing ranks run under ``python -m nccl.run``; rank 0 (the coordinator) starts
the new ranks itself, as separate processes, passing them the id.  Every rank checks
its collectives on the grown communicator against NumPy and reports one JSON line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, host_available, run_python

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

INVALID_ARGUMENT, INVALID_USAGE, TIMEOUT = 4, 5, 8

# Checks on a grown communicator `big` of N ranks, against NumPy; defines
# `collectives(big) -> list of what was wrong`.
CHECKS = r'''
import json, os
import numpy as np
import nccl.core as nc


def say(obj):
    """One JSON line in one write: the new ranks share rank 0's output."""
    os.write(1, (json.dumps(obj) + "\n").encode())


def collectives(big):
    r, n, bad = big.rank, big.nranks, []

    def data(k, size=1000):
        return (np.arange(size, dtype=np.float64) * (k + 1) + k).astype(np.float32)

    y = np.empty(1000, np.float32)
    big.allreduce(data(r), y, nc.SUM)
    if not np.array_equal(y, sum(data(k) for k in range(n))):
        bad.append("allreduce")
    g = np.empty(7 * n, np.int32)
    big.allgather(np.full(7, 10 * r + 1, np.int32), g)
    if not np.array_equal(g, np.repeat(10 * np.arange(n, dtype=np.int32) + 1, 7)):
        bad.append("allgather")
    b = data(n - 1, 5000) if r == n - 1 else np.zeros(5000, np.float32)
    big.broadcast(b, b, root=n - 1)           # from a new rank
    if not np.array_equal(b, data(n - 1, 5000)):
        bad.append("broadcast")
    rs = np.empty(3, np.float32)
    big.reduce_scatter(data(r, 3 * n), rs, nc.MAX)
    want = np.max([data(k, 3 * n) for k in range(n)], axis=0)[3 * r:3 * r + 3]
    if not np.array_equal(rs, want):
        bad.append("reduce_scatter")
    got = np.empty(64, np.float32)
    with nc.group():                           # a ring of sends
        big.send(data(r, 64), (r + 1) % n)
        big.recv(got, (r - 1) % n)
    if not np.array_equal(got, data((r - 1) % n, 64)):
        bad.append("send/recv")
    return bad
'''

NEW_RANK = CHECKS + r'''
import json, sys
from nccl.bindings import NCCLError
uid, nranks, rank = bytes.fromhex(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
try:
    big = nc.Communicator().grow(nranks, nc.UniqueId.from_bytes(uid), rank=rank)
except NCCLError as e:
    say({"new": rank, "status": e.status, "msg": str(e)})
    sys.exit(0)
say({"new": rank, "rank": big.rank, "nranks": big.nranks, "bad": collectives(big)})
big.destroy()
'''

EXISTING = CHECKS + r'''
import json, os, subprocess, sys, time
from nccl.bindings import NCCLError
nranks, new_ranks, pass_id = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
comm = nc.Communicator.from_env()
kids = []
uid = None
if comm.rank == 0:
    uid = comm.get_unique_id()
    if pass_id == "wrong":
        uid = nc.get_unique_id()               # not the id of this grow
    for r in new_ranks:
        kids.append(subprocess.Popen([sys.executable, "-c", os.environ["NEW_RANK"],
                                      bytes(uid).hex(), str(nranks), str(r)]))
report = {"rank": comm.rank}
t0 = time.monotonic()
try:
    big = comm.grow(nranks, uid)               # the others pass None

    report.update(kept=big.rank == comm.rank, nranks=big.nranks, bad=collectives(big))
    big.destroy()
except NCCLError as e:
    report.update(status=e.status, msg=str(e), waited=time.monotonic() - t0)
x = np.ones(4, np.float32)
comm.allreduce(x, x, nc.SUM)                   # the parent still works
report["parent"] = float(x[0])
say(report)
comm.destroy()
for k in kids:
    k.wait(120)
'''


def run_grow(tmp_path: Path, nexisting: int, nranks: int, new_ranks: list[int],
             pass_id: str = "root", timeout: str = "60") -> tuple[dict, dict]:
    """Existing ranks 0..nexisting-1 grow to `nranks`; rank 0 starts `new_ranks`
    and passes the id (pass_id="wrong": another one), the others pass None.
    Returns ({existing rank: report}, {new rank: report})."""
    script = tmp_path / "existing.py"
    script.write_text(EXISTING)
    env = clean_env(NCCL4PY_HOST_TIMEOUT=timeout, NEW_RANK=NEW_RANK)
    p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", str(nexisting), "--backend",
                        "host", "--timeout", "150", str(script), str(nranks),
                        json.dumps(new_ranks), pass_id],
                       env=env, capture_output=True, text=True, timeout=200)
    out = f"exit {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    assert p.returncode == 0, out
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    existing = {r["rank"]: r for r in lines if "new" not in r}
    new = {r["new"]: r for r in lines if "new" in r}
    assert sorted(existing) == list(range(nexisting)), out
    assert sorted(new) == sorted(new_ranks), out
    return existing, new


def test_two_ranks_grow_to_four(tmp_path):
    existing, new = run_grow(tmp_path, 2, 4, [2, 3])
    for r, rep in existing.items():
        assert rep.get("kept") is True and rep["nranks"] == 4 and rep["bad"] == [], rep
        assert rep["parent"] == 2.0, rep
    for r, rep in new.items():
        assert rep.get("rank") == r and rep["nranks"] == 4 and rep["bad"] == [], rep


def test_new_rank_that_never_arrives_is_a_timeout(tmp_path):
    """Rank 3 is never started: the other three fail with Timeout naming it
    (not a hang), and the parent communicator still works."""
    existing, new = run_grow(tmp_path, 2, 4, [2], timeout="2")
    for rep in [*existing.values(), *new.values()]:
        assert rep.get("status") == TIMEOUT, rep
        assert "ncclCommGrow" in rep["msg"] and "missing: rank 3" in rep["msg"], rep
    for rep in existing.values():
        assert rep["waited"] < 30 and rep["parent"] == 2.0, rep


def test_a_wrong_id_fails_every_existing_rank_at_once(tmp_path):
    """The coordinator passes an id that is not its communicator's: every
    existing rank fails with InvalidArgument naming it, without waiting."""
    existing, _ = run_grow(tmp_path, 3, 4, [], pass_id="wrong", timeout="100")
    for rep in existing.values():
        assert rep.get("status") == INVALID_ARGUMENT, rep
        assert "rank 0 passed a unique id that is not the one" in rep["msg"], rep
        assert rep["waited"] < 30 and rep["parent"] == 3.0, rep


ONE_PROCESS = CHECKS + r'''
import json, time
from nccl.bindings import NCCLError
out = {}

def status(f):
    t0 = time.monotonic()
    try:
        f()
        return "ok"
    except NCCLError as e:
        assert time.monotonic() - t0 < 5, "waited"
        return [e.status, str(e)]
    except Exception as e:
        return [type(e).__name__, str(e)]

c = nc.Communicator.init(2 - 1, 0, nc.get_unique_id())
uid = c.get_unique_id()
out["second id"] = status(c.get_unique_id)
out["init with it"] = status(lambda: nc.Communicator.init(3, 1, uid))
out["plain id"] = status(lambda: nc.Communicator().grow(3, nc.get_unique_id(), rank=1))
out["rank below"] = status(lambda: nc.Communicator().grow(3, uid, rank=0))
out["rank above"] = status(lambda: nc.Communicator().grow(3, uid, rank=3))
out["not larger"] = status(lambda: nc.Communicator().grow(1, uid, rank=1))
out["existing with rank"] = status(lambda: c.grow(3, uid, rank=1))
out["new without comm"] = status(lambda: nc.Communicator().grow(3, uid))
with nc.group():                               # both sides from one thread
    big0 = c.grow(3, uid)
    big1 = nc.Communicator().grow(3, uid, rank=1)
    big2 = nc.Communicator().grow(3, uid, rank=2)
bigs = [big0, big1, big2]
out["ranks"] = [b.rank for b in bigs]
xs = [np.full(4, k + 1, np.float32) for k in range(3)]
with nc.group():
    for b, x in zip(bigs, xs):
        b.allreduce(x, x, nc.SUM)
out["sums"] = [float(x[0]) for x in xs]
for b in bigs:
    b.destroy()
out["used id"] = status(lambda: c.grow(3, uid))
c.destroy()
print(json.dumps(out))
'''


def test_argument_checks_and_a_grow_in_one_process():
    p = run_python(ONE_PROCESS, clean_env(NCCL4PY_HOST_TIMEOUT="20", NCCL4PY_BACKEND="host"),
                   timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["second id"][0] == INVALID_USAGE, out
    for case, words in (("init with it", "ncclCommGetUniqueId"),
                        ("plain id", "ncclGetUniqueId"),
                        ("rank below", "from 1 to 2"), ("rank above", "from 1 to 2"),
                        ("not larger", "must be larger")):
        assert out[case][0] == INVALID_ARGUMENT and words in out[case][1], (case, out[case])
    assert out["existing with rank"] == ["NcclInvalid", "New ranks must use a null communicator "
                                         "(Communicator())"], out
    assert out["new without comm"][0] == "NcclInvalid", out
    assert out["ranks"] == [0, 1, 2] and out["sums"] == [6.0, 6.0, 6.0], out
    assert out["used id"][0] == INVALID_ARGUMENT, out


def test_every_existing_rank_may_pass_the_id(tmp_path):
    """NCCL lets the non-coordinators pass the id as well as NULL."""
    script = tmp_path / "all_pass.py"
    script.write_text(CHECKS + r'''
import json, os, sys
comm = nc.Communicator.from_env()
# every rank learns the coordinator's id through a broadcast of its bytes
uid = comm.get_unique_id() if comm.rank == 0 else nc.get_unique_id(empty=True)
raw = np.frombuffer(bytearray(bytes(uid)), np.uint8).copy()
comm.broadcast(raw, raw, root=0)
uid = nc.UniqueId.from_bytes(raw.tobytes())
big = comm.grow(comm.nranks + 1, uid) if comm.rank != 0 else None
if comm.rank == 0:
    import subprocess
    kid = subprocess.Popen([sys.executable, "-c", os.environ["NEW_RANK"], raw.tobytes().hex(),
                            str(comm.nranks + 1), str(comm.nranks)])
    big = comm.grow(comm.nranks + 1, uid)
say({"rank": big.rank, "bad": collectives(big)})
me = comm.rank
big.destroy()
comm.destroy()
if me == 0:
    kid.wait(120)
''')
    p = subprocess.run([sys.executable, "-m", "nccl.run", "-n", "3", "--backend", "host",
                        "--timeout", "150", str(script)],
                       env=clean_env(NCCL4PY_HOST_TIMEOUT="60", NEW_RANK=NEW_RANK),
                       capture_output=True, text=True, timeout=200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in lines) == [0, 1, 2, 3], lines
    assert all(r["bad"] == [] for r in lines), lines
