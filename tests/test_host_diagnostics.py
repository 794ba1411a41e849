"""What the host backend says on stderr: a line naming the ranks a blocked
call waits for (after NCCL4PY_HOST_WAIT_REPORT seconds, then at a slowing
pace), and NCCL-like lines under NCCL_DEBUG."""
from __future__ import annotations

import re

import pytest

from conftest import host_available, new_ids
from hostproc import Rank, host_env

pytestmark = pytest.mark.skipif(not host_available(), reason="host backend not built")

WORKER = r"""
import json, sys, time
import numpy as np
import nccl.core as nc
from nccl.bindings import NCCLError
nranks, rank, uid, late = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3]), float(sys.argv[4])
comm = nc.Communicator.init(nranks, rank, nc.UniqueId.from_bytes(uid))
x = np.ones(8, np.float32)
comm.allreduce(x, x, nc.SUM)                  # operation #1: everybody
if rank > 0:
    time.sleep(late)
comm.allreduce(x, x, nc.SUM)                  # operation #2: ranks 1.. arrive late
print(json.dumps({"ok": float(x[0])}), flush=True)
comm.destroy()
"""

WAIT_LINE = re.compile(r"^nccl4py host: rank 0 of 3 waiting (\S+) s for ranks 1,2 in "
                       r"ncclAllReduce #2 \(comm 0x[0-9a-f]+\)$", re.M)


def run_job(nranks: int, late: float, **env: str) -> list[Rank]:
    (uid,) = new_ids(1)
    e = host_env(NCCL4PY_HOST_TIMEOUT="120", **env)
    ranks = [Rank(WORKER, str(nranks), str(r), uid, str(late), env=e) for r in range(nranks)]
    try:
        for r in ranks:
            assert r.event(120) == {"ok": float(nranks) ** 2}
            assert r.wait() == 0, r.stderr()
    finally:
        for r in ranks:
            r.kill()
    return ranks


def test_blocked_call_names_the_missing_ranks_at_a_slowing_pace():
    ranks = run_job(3, 2.4, NCCL4PY_HOST_WAIT_REPORT="0.5")
    lines = WAIT_LINE.findall(ranks[0].stderr())
    # at 0.5 s and 1.5 s; the next (4.5 s) comes after the late ranks arrived,
    # unless the machine is very busy
    assert lines[:2] == ["0.5", "1.5"] and set(lines[2:]) <= {"4.5"}, ranks[0].stderr()


def test_no_wait_line_when_disabled_or_not_blocked_long():
    ranks = run_job(3, 1.0, NCCL4PY_HOST_WAIT_REPORT="0")
    assert "waiting" not in ranks[0].stderr()
    ranks = run_job(2, 0.0)                   # default threshold (10 s) never reached
    assert ranks[0].stderr() == ""


def test_nccl_debug_info_prints_nccl_like_init_lines():
    ranks = run_job(2, 0.0, NCCL_DEBUG="INFO")
    err = ranks[1].stderr()
    assert re.search(r"^NCCL version 2\.\d+\.\d+\+nccl4py\.host$", err, re.M), err
    prefix = r"^[^:\s]+:\d+:\d+ \[0\] NCCL INFO "
    assert re.search(prefix + r"comm 0x[0-9a-f]+ rank 1 nRanks 2 .*Init COMPLETE$", err, re.M), err
    assert re.search(prefix + r".*segment .* slot \d+ bytes, ring \d+ bytes", err, re.M), err
    assert re.search(prefix + r"comm 0x[0-9a-f]+ rank 1 nRanks 2 .*Destroy COMPLETE$", err,
                     re.M), err


def test_nccl_debug_warn_prints_errors_only():
    (uid,) = new_ids(1)
    code = r"""
import sys, nccl.core as nc, nccl.bindings as b
comm = nc.Communicator.init(1, 0, nc.UniqueId.from_bytes(bytes.fromhex(sys.argv[1])))
try:
    b.comm_init_rank(0, bytes(b.get_unique_id()), 0)
except b.NCCLError:
    pass
comm.destroy()
print("{}")
"""
    for level, expect_warn in (("WARN", True), ("warn", True), ("VERSION", False), ("", False)):
        r = Rank(code, uid, env=host_env(NCCL_DEBUG=level))
        r.event(60)
        assert r.wait() == 0
        err = r.stderr()
        assert ("NCCL INFO" in err) is False, err
        warn = re.findall(r"^[^:\s]+:\d+:\d+ \[\d+\] NCCL WARN .*nranks 0.*$", err, re.M)
        assert bool(warn) is expect_warn, (level, err)
        assert ("NCCL version" in err) is (level.upper() in ("WARN", "VERSION")), (level, err)


def test_unknown_nccl_debug_value_is_ignored_with_one_warning():
    r = Rank("import nccl.core as nc\n"
             "for _ in range(3):\n"
             "    nc.Communicator.init(1, 0, nc.get_unique_id()).destroy()\n"
             "print('{}')", env=host_env(NCCL_DEBUG="LOUD"))
    r.event(60)
    assert r.wait() == 0
    err = r.stderr()
    assert err.count("NCCL_DEBUG=LOUD") == 1, err
    assert "VERSION, WARN, INFO" in err, err
    assert "NCCL INFO" not in err and "NCCL WARN" not in err, err
